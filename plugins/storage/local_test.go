package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

func readAll(t *testing.T, d *storage.Disk, key string) (string, storage.Info) {
	t.Helper()
	obj, err := d.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b), obj.Info
}

func listKeys(t *testing.T, d *storage.Disk, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range d.List(context.Background(), prefix) {
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func TestLocalRoundTrip(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := start(t, localTOML(root), "files", nil).disk
	ctx := context.Background()

	if err := d.Put(ctx, "reports/2026/01.csv", strings.NewReader("a,b\n1,2\n"), ""); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "reports/2026-summary.txt", io.NopCloser(strings.NewReader("sum")), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "other.bin", strings.NewReader("x"), ""); err != nil {
		t.Fatal(err)
	}
	body, info := readAll(t, d, "reports/2026/01.csv")
	if body != "a,b\n1,2\n" || info.Size != 8 || !strings.HasPrefix(info.ContentType, "text/csv") || info.LastModified.IsZero() {
		t.Fatalf("got %q %+v", body, info)
	}
	if st, err := d.Stat(ctx, "other.bin"); err != nil || st.Size != 1 || st.ContentType != "application/octet-stream" {
		t.Fatalf("stat: %+v %v", st, err)
	}
	if got := listKeys(t, d, "reports/2026"); strings.Join(got, ",") != "reports/2026/01.csv,reports/2026-summary.txt" &&
		strings.Join(got, ",") != "reports/2026-summary.txt,reports/2026/01.csv" {
		t.Fatalf("list reports/2026 = %v", got)
	}
	if got := listKeys(t, d, "reports/2026/"); len(got) != 1 || got[0] != "reports/2026/01.csv" {
		t.Fatalf("list reports/2026/ = %v", got)
	}
	if got := listKeys(t, d, ""); len(got) != 3 {
		t.Fatalf("list all = %v", got)
	}
	if got := listKeys(t, d, "nothing/here/"); len(got) != 0 {
		t.Fatalf("list of a missing directory = %v", got)
	}

	if ok, err := d.Exists(ctx, "other.bin"); !ok || err != nil {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if err := d.Delete(ctx, "reports/2026/01.csv"); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.Exists(ctx, "reports/2026/01.csv"); ok || err != nil {
		t.Fatalf("exists after delete: %v %v", ok, err)
	}
	if _, err := os.Stat(filepath.Join(root, "reports", "2026")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the emptied directory is still there: %v", err)
	}
	if err := d.Delete(ctx, "reports/2026/01.csv"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	_, err := d.Get(ctx, "reports/2026/01.csv")
	if !errors.Is(err, storage.ErrNotExist) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("get missing: %v", err)
	}
	// A directory is not an object.
	if _, err := d.Get(ctx, "reports"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("get of a directory: %v", err)
	}
}

func TestLocalPutReplacesWholeAndLeavesNoTemporaryFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := start(t, localTOML(root), "files", nil).disk
	ctx := context.Background()
	if err := d.Put(ctx, "a/b.txt", strings.NewReader("first version, longer"), ""); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "a/b.txt", strings.NewReader("second"), ""); err != nil {
		t.Fatal(err)
	}
	if body, _ := readAll(t, d, "a/b.txt"); body != "second" {
		t.Fatalf("body = %q", body)
	}
	// A body that fails half-way leaves the old object and no temporary file.
	failing := io.MultiReader(strings.NewReader("partial"), errReader{errors.New("client went away")})
	var be *storage.BodyError
	if err := d.Put(ctx, "a/b.txt", failing, ""); !errors.As(err, &be) {
		t.Fatalf("put of a failing body = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Put(cctx, "a/c.txt", strings.NewReader("never"), ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("put with a cancelled context: %v", err)
	}
	if body, _ := readAll(t, d, "a/b.txt"); body != "second" {
		t.Fatalf("body after a failed put = %q", body)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "a"))
	if len(entries) != 1 {
		t.Fatalf("files in a/: %v", entries)
	}
}

// A local object's ETag is a quoted strong validator in S3's form, the same
// from Stat, Get, List and the signed route's ETag header, stable while the
// file is unchanged; every Put gives a new one (even of the same bytes), and
// so does a change made in place. The signed route answers If-None-Match.
func TestLocalETag(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := start(t, localTOML(root), "files", nil)
	ctx := context.Background()
	etag := func() string {
		t.Helper()
		info, err := s.disk.Stat(ctx, "a/b.txt")
		if err != nil {
			t.Fatal(err)
		}
		return info.ETag
	}
	if err := s.disk.Put(ctx, "a/b.txt", strings.NewReader("one"), ""); err != nil {
		t.Fatal(err)
	}
	first := etag()
	if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(first) {
		t.Fatalf("ETag = %q, want 32 hex digits in quotes", first)
	}
	_, got := readAll(t, s.disk, "a/b.txt")
	var listed []string
	for info, err := range s.disk.List(ctx, "a/") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, info.ETag)
	}
	if again := etag(); again != first || got.ETag != first || len(listed) != 1 || listed[0] != first {
		t.Fatalf("ETag: stat %q, again %q, get %q, list %q; want one tag", first, again, got.ETag, listed)
	}

	u, err := s.disk.TemporaryURL(ctx, "a/b.txt", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.svc.Get(t, u); r.Status != http.StatusOK || r.Header.Get("ETag") != first {
		t.Fatalf("signed GET = %d, ETag %q; want %q", r.Status, r.Header.Get("ETag"), first)
	}
	if r := s.svc.Get(t, u, "If-None-Match", first); r.Status != http.StatusNotModified {
		t.Fatalf("signed GET with If-None-Match = %d, want 304", r.Status)
	}

	if err := s.disk.Put(ctx, "a/b.txt", strings.NewReader("one"), ""); err != nil {
		t.Fatal(err)
	}
	second := etag()
	if second == first {
		t.Fatalf("a Put of the same bytes kept the ETag %q", first)
	}
	// Changed in place by something else: a new modification time.
	file := filepath.Join(root, "a", "b.txt")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, fi.ModTime(), fi.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if third := etag(); third == second || third == first {
		t.Fatalf("a change in place kept the ETag: %q, before %q", third, second)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Every operation refuses a key that could leave the root, before any I/O, and
// nothing outside the root is read, written or removed.
func TestLocalTraversalAttemptsAreErrors(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	secret := filepath.Join(base, "secret.txt")
	if err := os.WriteFile(secret, []byte("outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := start(t, localTOML(root), "files", nil).disk
	ctx := context.Background()
	bad := []string{
		"../secret.txt", "a/../../secret.txt", "a/../b", "..", ".", "./a", "a/./b",
		"/etc/passwd", "/" + secret, "a//b", "a/", "", "a\x00b", "..\\secret.txt", "a\\b",
		strings.Repeat("k", 1025), "bad\xffutf8",
	}
	for _, key := range bad {
		checks := map[string]error{
			"put":    d.Put(ctx, key, strings.NewReader("pwned"), ""),
			"delete": d.Delete(ctx, key),
		}
		_, checks["get"] = d.Get(ctx, key)
		_, checks["stat"] = d.Stat(ctx, key)
		_, checks["exists"] = d.Exists(ctx, key)
		_, checks["url"] = d.URL(key)
		_, checks["temporary_url"] = d.TemporaryURL(ctx, key, time.Minute)
		for op, err := range checks {
			var ke *storage.KeyError
			if !errors.Is(err, storage.ErrInvalidKey) || !errors.As(err, &ke) {
				t.Errorf("%s(%q) = %v, want an invalid key error", op, key, err)
			}
		}
		if p, ok := problem.As(d.Delete(ctx, key)); !ok || p.Status != http.StatusBadRequest {
			t.Errorf("delete(%q) does not render as 400", key)
		}
	}
	for _, prefix := range []string{"../", "/etc", "a/../", "..", "a\x00"} {
		for _, err := range d.List(ctx, prefix) {
			if !errors.Is(err, storage.ErrInvalidKey) {
				t.Errorf("list(%q) error = %v", prefix, err)
			}
		}
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "outside" {
		t.Fatalf("the file outside the root changed: %q %v", b, err)
	}

	// A symbolic link inside the root that points outside is not followed out,
	// for reading, writing or deleting.
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret.txt", filepath.Join(root, "relative")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"escape/secret.txt", "relative"} {
		if obj, err := d.Get(ctx, key); err == nil {
			b, _ := io.ReadAll(obj)
			obj.Close()
			t.Errorf("get(%q) read %q from outside the root", key, b)
		}
		_ = d.Delete(ctx, key)
	}
	// Writing through the directory link fails; writing the key "relative"
	// replaces the link itself with a file inside the root (rename does not
	// follow links), which the check below confirms left the outside alone.
	if err := d.Put(ctx, "escape/secret.txt", strings.NewReader("pwned"), ""); err == nil {
		t.Error("put succeeded through a directory link out of the root")
	}
	if err := d.Put(ctx, "relative", strings.NewReader("inside"), ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "relative")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("relative is not a regular file inside the root: %v %v", fi, err)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "outside" {
		t.Fatalf("the file outside the root changed or went: %q %v", b, err)
	}
	for _, k := range listKeys(t, d, "") {
		if strings.Contains(k, "secret") {
			t.Errorf("list went through a link out of the root: %q", k)
		}
	}
}

func TestValidateKeyAcceptsOrdinaryKeys(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"a", "a/b/c.txt", "invoices/2026/ÄÖ ü.pdf", "..hidden", "a..b", ".env", "a/...", "x y+z=1&2"} {
		if err := storage.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v", key, err)
		}
	}
}

func TestLocalVisibilitySetsPermissions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		visibility string
		file, dir  os.FileMode
	}{{"private", 0o600, 0o700}, {"public", 0o644, 0o755}} {
		root := t.TempDir()
		d := start(t, localTOML(root, `visibility = "`+tc.visibility+`"`, `base_url = "https://cdn.example.com/files/"`), "files", nil).disk
		if err := d.Put(ctx, "dir/f.txt", strings.NewReader("x"), ""); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(root, "dir", "f.txt"))
		if err != nil || fi.Mode().Perm() != tc.file {
			t.Errorf("%s file mode = %v %v", tc.visibility, fi.Mode(), err)
		}
		di, err := os.Stat(filepath.Join(root, "dir"))
		if err != nil || di.Mode().Perm() != tc.dir {
			t.Errorf("%s dir mode = %v %v", tc.visibility, di.Mode(), err)
		}
		u, err := d.URL("dir/a b#c.txt")
		switch tc.visibility {
		case "public":
			if err != nil || u != "https://cdn.example.com/files/dir/a%20b%23c.txt" {
				t.Errorf("public URL = %q %v", u, err)
			}
		case "private":
			if !errors.Is(err, storage.ErrPrivate) {
				t.Errorf("private URL = %q %v", u, err)
			}
		}
	}
}

func TestLocalTemporaryURL(t *testing.T) {
	t.Parallel()
	s := start(t, localTOML(t.TempDir()), "files", nil)
	ctx := context.Background()
	if err := s.disk.Put(ctx, "docs/report 1.pdf", strings.NewReader("%PDF-1.7 hello"), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.disk.Put(ctx, "docs/other.pdf", strings.NewReader("%PDF other"), ""); err != nil {
		t.Fatal(err)
	}
	u, err := s.disk.TemporaryURL(ctx, "docs/report 1.pdf", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "/_storage/files/docs/report%201.pdf?expires=") {
		t.Fatalf("temporary URL = %q", u)
	}

	r := s.svc.Get(t, u)
	if r.Status != 200 || r.String() != "%PDF-1.7 hello" || r.Header.Get("Content-Type") != "application/pdf" ||
		r.Header.Get("Cache-Control") != "private, no-store" {
		t.Fatalf("GET signed = %d %q %v", r.Status, r.Body, r.Header)
	}
	if r := s.svc.Get(t, u, "Range", "bytes=0-3"); r.Status != http.StatusPartialContent || r.String() != "%PDF" {
		t.Fatalf("range = %d %q", r.Status, r.Body)
	}
	if r := s.svc.Do(t, http.MethodHead, u, ""); r.Status != 200 || r.Header.Get("Content-Length") != "14" {
		t.Fatalf("HEAD = %d %v", r.Status, r.Header)
	}

	sig := u[strings.Index(u, "signature=")+len("signature="):]
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'A' {
			b[0] = 'B'
		} else {
			b[0] = 'A'
		}
		return string(b)
	}
	tampered := map[string]string{
		"signature":     strings.Replace(u, sig, flip(sig), 1),
		"key":           strings.Replace(u, "report%201.pdf", "other.pdf", 1),
		"disk":          strings.Replace(u, "/files/", "/other/", 1),
		"expires":       strings.Replace(u, "expires=1", "expires=2", 1),
		"no signature":  u[:strings.Index(u, "&signature=")],
		"short":         strings.Replace(u, sig, sig[:10], 1),
		"not base64":    strings.Replace(u, sig, "!!!", 1),
		"no query":      u[:strings.Index(u, "?")],
		"traversal key": strings.Replace(u, "docs/report%201.pdf", "docs/../docs/report%201.pdf", 1),
	}
	for name, tu := range tampered {
		r := s.svc.Get(t, tu)
		if r.Status != http.StatusForbidden && r.Status != http.StatusNotFound {
			t.Errorf("%s: GET %s = %d %s", name, tu, r.Status, r.Body)
		}
		if r.Status == http.StatusOK || strings.Contains(r.String(), "PDF") {
			t.Errorf("%s: served the object", name)
		}
	}
	if r := s.svc.Get(t, tampered["signature"]); r.Status != http.StatusForbidden ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), problem.ContentType) || !strings.Contains(r.String(), "signature") {
		t.Fatalf("tampered = %d %s", r.Status, r.Body)
	}

	// A signed URL for a key that is then deleted is a 404.
	gone, _ := s.disk.TemporaryURL(ctx, "docs/other.pdf", time.Minute)
	_ = s.disk.Delete(ctx, "docs/other.pdf")
	if r := s.svc.Get(t, gone); r.Status != http.StatusNotFound {
		t.Fatalf("deleted object = %d", r.Status)
	}

	// Expiry follows the App's clock: still valid at 9m59s, refused at 10m.
	s.clock.Advance(10*time.Minute - time.Second)
	if r := s.svc.Get(t, u); r.Status != 200 {
		t.Fatalf("before expiry = %d %s", r.Status, r.Body)
	}
	s.clock.Advance(time.Second)
	if r := s.svc.Get(t, u); r.Status != http.StatusForbidden || !strings.Contains(r.String(), "expired") {
		t.Fatalf("after expiry = %d %s", r.Status, r.Body)
	}
	if _, err := s.disk.TemporaryURL(ctx, "docs/report 1.pdf", 0); err == nil {
		t.Fatal("a zero lifetime was accepted")
	}
}

// A signed URL is accepted only as the service spelled it: another spelling
// of the same expiry, or of the same signature bytes, is a tampered URL, a
// 403 naming the signature.
func TestLocalTemporaryURLRefusesOtherSpellings(t *testing.T) {
	t.Parallel()
	s := start(t, localTOML(t.TempDir()), "files", nil)
	ctx := context.Background()
	if err := s.disk.Put(ctx, "k.txt", strings.NewReader("v"), ""); err != nil {
		t.Fatal(err)
	}
	u, err := s.disk.TemporaryURL(ctx, "k.txt", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sig := u[strings.Index(u, "signature=")+len("signature="):]
	// 32 bytes of HMAC are 43 characters of base64url, whose last carries
	// 2 bits that decode to nothing: flipping one gives the same bytes.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	spellings := map[string]string{
		"expires with a plus sign":    strings.Replace(u, "expires=", "expires=%2B", 1),
		"expires with a leading zero": strings.Replace(u, "expires=", "expires=0", 1),
		"signature's unused bits set": strings.Replace(u, sig, sig[:len(sig)-1]+string(alphabet[last^1]), 1),
		"signature with a line break": strings.Replace(u, sig, sig[:20]+"%0A"+sig[20:], 1),
	}
	for name, su := range spellings {
		if r := s.svc.Get(t, su); r.Status != http.StatusForbidden || !strings.Contains(r.String(), "signature") {
			t.Errorf("%s: GET %s = %d %s; want 403 naming the signature", name, su, r.Status, r.Body)
		}
	}
	if r := s.svc.Get(t, u); r.Status != http.StatusOK || r.String() != "v" {
		t.Fatalf("GET as signed = %d %s", r.Status, r.Body)
	}
}

func TestLocalTemporaryURLUsesPublicURL(t *testing.T) {
	t.Parallel()
	toml := "[plugin.storage]\npublic_url = \"https://api.example.com/\"\nroute_prefix = \"/files-signed\"\n" + localTOML(t.TempDir())
	s := start(t, toml, "files", nil)
	u, err := s.disk.TemporaryURL(context.Background(), "a.txt", time.Minute)
	if err != nil || !strings.HasPrefix(u, "https://api.example.com/files-signed/files/a.txt?expires=") {
		t.Fatalf("temporary URL = %q %v", u, err)
	}
	_ = s.disk.Put(context.Background(), "a.txt", strings.NewReader("A"), "")
	if r := s.svc.Get(t, strings.TrimPrefix(u, "https://api.example.com")); r.Status != 200 || r.String() != "A" {
		t.Fatalf("GET = %d %s", r.Status, r.Body)
	}
}

// A URL signed by one process's key is refused by another's: the signing key is
// what makes it valid.
func TestLocalTemporaryURLNeedsTheSameKey(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a := start(t, localTOML(root), "files", nil)
	other := strings.Replace(localTOML(root), testSigningKey, strings.Repeat("z", 40), 1)
	b := start(t, other, "files", nil)
	_ = a.disk.Put(context.Background(), "k.txt", strings.NewReader("v"), "")
	u, _ := a.disk.TemporaryURL(context.Background(), "k.txt", time.Minute)
	if r := a.svc.Get(t, u); r.Status != 200 {
		t.Fatalf("same key = %d", r.Status)
	}
	if r := b.svc.Get(t, u); r.Status != http.StatusForbidden {
		t.Fatalf("other key = %d", r.Status)
	}
}

// The signature covers the disk's name, so a URL whose disk was changed is a
// 403 like any other tampered parameter, checked before any lookup: changed to
// a disk that does not exist, to another local disk with the same key, or to
// an s3 disk. A URL the service did sign, for a disk since removed from its
// configuration (another disk has the same key), is a 404: the object went
// with the disk.
func TestLocalTemporaryURLOfAnotherDisk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	disks := func(names ...string) string {
		toml := "[plugin.storage]\ndefault = \"files\"\n"
		for _, name := range names {
			toml += strings.Replace(localTOML(filepath.Join(root, name)), "disks.files", "disks."+name, 1)
		}
		return toml
	}
	s3 := fmt.Sprintf("[plugin.storage.disks.bucket]\ndriver = \"s3\"\nbucket = \"b\"\nendpoint = \"http://127.0.0.1:9\"\npath_style = true\naccess_key = %q\nsecret_key = %q\n",
		testAccessKey, testSecretKey)
	s := start(t, disks("files", "spare")+s3, "files", nil)
	ctx := context.Background()
	if err := s.disk.Put(ctx, "k.txt", strings.NewReader("files"), ""); err != nil {
		t.Fatal(err)
	}
	u, err := s.disk.TemporaryURL(ctx, "k.txt", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, disk := range []string{"nope", "spare", "bucket"} {
		tu := strings.Replace(u, "/files/", "/"+disk+"/", 1)
		r := s.svc.Get(t, tu)
		if r.Status != http.StatusForbidden || !strings.HasPrefix(r.Header.Get("Content-Type"), problem.ContentType) ||
			!strings.Contains(r.String(), "signature") {
			t.Errorf("disk changed to %q: GET %s = %d %s, want 403 for the signature", disk, tu, r.Status, r.Body)
		}
	}

	spare, err := storage.For(s.svc.App, "spare")
	if err != nil {
		t.Fatal(err)
	}
	if err := spare.Put(ctx, "k.txt", strings.NewReader("spare"), ""); err != nil {
		t.Fatal(err)
	}
	gone, err := spare.TemporaryURL(ctx, "k.txt", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	without := start(t, disks("files"), "files", nil)
	if r := without.svc.Get(t, gone); r.Status != http.StatusNotFound {
		t.Fatalf("signed for a disk since removed = %d %s, want 404", r.Status, r.Body)
	}
	if r := without.svc.Get(t, strings.Replace(gone, "k.txt", "other.txt", 1)); r.Status != http.StatusForbidden {
		t.Fatalf("tampered, for a disk since removed = %d %s, want 403", r.Status, r.Body)
	}
}

func TestLocalReadiness(t *testing.T) {
	t.Parallel()
	s := start(t, localTOML(t.TempDir()), "files", nil)
	if r := s.svc.Get(t, "/ready"); r.Status != 200 || !strings.Contains(r.String(), `"status":"ok"`) {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}

	// A root that cannot exist (its parent is a file) does not stop the boot; it
	// makes the service degraded, or unavailable when storage is critical.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := start(t, localTOML(filepath.Join(blocker, "root")), "files", nil)
	r := bad.svc.Get(t, "/ready")
	if r.Status != 200 || !strings.Contains(r.String(), `"status":"degraded"`) || !strings.Contains(r.String(), `disk \"files\"`) {
		t.Fatalf("/ready = %d %s", r.Status, r.Body)
	}
	if err := bad.disk.Put(context.Background(), "a", strings.NewReader("x"), ""); err == nil {
		t.Fatal("put on an unusable root succeeded")
	} else if p, ok := problem.As(err); !ok || p.Status != 503 {
		t.Fatalf("put on an unusable root = %v", err)
	}
	crit := start(t, "[plugin.storage]\ncritical = true\n"+localTOML(filepath.Join(blocker, "root")), "files", nil)
	if r := crit.svc.Get(t, "/ready"); r.Status != 503 || !strings.Contains(r.String(), `"verdict":"unavailable"`) {
		t.Fatalf("critical /ready = %d %s", r.Status, r.Body)
	}
}

func TestForUnknownDiskFailsTheBoot(t *testing.T) {
	t.Parallel()
	app, err := newApp(t, localTOML(t.TempDir()), func(app *framework.App, r chi.Router) error {
		_, err := storage.For(app, "uploads")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("boot succeeded with an unknown disk")
	}
	if !strings.Contains(err.Error(), `no disk "uploads"`) {
		t.Fatalf("error = %v", err)
	}
}

func TestBodyErrorRendering(t *testing.T) {
	t.Parallel()
	s := start(t, localTOML(t.TempDir()), "files", func(d *storage.Disk, r chi.Router) {
		r.Put("/upload/{key}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			body := http.MaxBytesReader(w, r.Body, 8)
			if err := d.Put(r.Context(), chi.URLParam(r, "key"), storage.Sized(body, r.ContentLength), ""); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}).ServeHTTP)
	})
	if r := s.svc.Do(t, http.MethodPut, "/upload/small", "12345678"); r.Status != http.StatusNoContent {
		t.Fatalf("small = %d %s", r.Status, r.Body)
	}
	if r := s.svc.Do(t, http.MethodPut, "/upload/big", "123456789"); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("big = %d %s", r.Status, r.Body)
	}
	if r := s.svc.Do(t, http.MethodPut, "/upload/..", "x"); r.Status != http.StatusBadRequest || !strings.Contains(r.String(), "invalid storage key") {
		t.Fatalf("traversal = %d %s", r.Status, r.Body)
	}
	if ok, _ := s.disk.Exists(context.Background(), "big"); ok {
		t.Fatal("the refused body was stored")
	}
}
