package idempotency

import (
	"bytes"
	"testing"
)

// FuzzFingerprint: two requests have the same fingerprint exactly when their
// method, target, subject and body are the same (no field can be shifted into
// its neighbour), and two claims share a store key exactly when their scope,
// subject (for the caller scope) and key are the same, so one caller can never
// reach another's stored response.
func FuzzFingerprint(f *testing.F) {
	f.Add("POST", "/payments", "ada", []byte(`{"a":1}`), "POST", "/payments", "bob", []byte(`{"a":1}`), "k1", "k1")
	f.Add("POST", "/a", "b", []byte("c"), "POST", "/ab", "", []byte("c"), "x", "x")
	f.Add("POST", "/a\x00b", "", []byte{}, "POST", "/a", "b", []byte{}, "k", "k")
	f.Add("POST", "/a\x00", "", []byte{}, "POST", "/a", "\x00", []byte{}, "k", "k")
	f.Add("PUT", "/x?y=1", "s", []byte(nil), "PUT", "/x?y=1", "s", []byte{}, "a:b", "b")
	f.Fuzz(func(t *testing.T, m1, t1, s1 string, b1 []byte, m2, t2, s2 string, b2 []byte, k1, k2 string) {
		same := m1 == m2 && t1 == t2 && s1 == s2 && bytes.Equal(b1, b2)
		if got := fingerprint(m1, t1, s1, b1) == fingerprint(m2, t2, s2, b2); got != same {
			t.Fatalf("fingerprints equal = %v for (%q %q %q %q) and (%q %q %q %q)", got, m1, t1, s1, b1, m2, t2, s2, b2)
		}
		for _, c := range []struct {
			scope1, scope2 string
			same           bool
		}{
			{ScopeCaller, ScopeCaller, s1 == s2 && k1 == k2},
			{ScopeGlobal, ScopeGlobal, k1 == k2},
			{ScopeCaller, ScopeGlobal, false},
		} {
			if got := storeKey(c.scope1, s1, k1) == storeKey(c.scope2, s2, k2); got != c.same {
				t.Fatalf("store keys equal = %v for %s/%q/%q and %s/%q/%q", got, c.scope1, s1, k1, c.scope2, s2, k2)
			}
		}
	})
}
