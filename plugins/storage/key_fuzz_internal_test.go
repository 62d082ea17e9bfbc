package storage

import (
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidateKey: a key ValidateKey accepts stays under a disk's root (local
// by filepath's rules, never "..", never absolute) and comes back unchanged
// from a temporary URL's path as net/http parses it; a key it refuses is a
// *KeyError that renders 400.
func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{
		"receipts/2026/1.pdf", "a", "../etc/passwd", "a/../../b", "/abs", "a//b", "a/", ".", "a/./b",
		"dir\\file", "nul\x00", "caf\xc3\xa9 r\xc3\xa9sum\xc3\xa9.pdf", "\xff", "%2e%2e/x", "a?b#c", "a;b/..;c", " ",
		strings.Repeat("k", 1025),
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		if err != nil {
			var ke *KeyError
			if !errors.As(err, &ke) || !errors.Is(err, ErrInvalidKey) || ke.Problem().Status != http.StatusBadRequest {
				t.Fatalf("ValidateKey(%q) = %v, want a *KeyError answering 400", key, err)
			}
			return
		}
		if !filepath.IsLocal(key) {
			t.Fatalf("ValidateKey accepted %q, which is not local to the root", key)
		}
		root := "/srv/disk"
		if p := filepath.Join(root, key); !strings.HasPrefix(p, root+"/") {
			t.Fatalf("ValidateKey accepted %q, which joins to %q outside %s", key, p, root)
		}
		u, perr := url.Parse("http://127.0.0.1:8000/files/receipts/" + escapeKey(key) + "?expires=1&signature=x")
		if perr != nil {
			t.Fatalf("the temporary URL of %q does not parse: %v", key, perr)
		}
		if got, _ := strings.CutPrefix(u.Path, "/files/receipts/"); got != key {
			t.Fatalf("key %q came back from its URL as %q", key, got)
		}
	})
}
