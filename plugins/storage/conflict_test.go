package storage_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// putRoute mounts PUT /objects/* storing the body under the rest of the path,
// returning Put's error as the handler's.
func putRoute(d *storage.Disk, r chi.Router) {
	r.Method(http.MethodPut, "/objects/*", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		if err := d.Put(r.Context(), chi.URLParam(r, "*"), r.Body, ""); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
}

// temporaryFiles lists the files a Put left behind under root.
func temporaryFiles(t *testing.T, root string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".jfast-put-") {
			left = append(left, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// A local disk keeps objects as files, so a key under an object, or a key
// holding other objects, cannot be stored: the caller's conflict, a 409 (never
// the 503 of a disk that is down), with the object in the way untouched and no
// temporary file left. Reading such a key finds nothing, as on S3.
func TestLocalPutConflicts(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s := start(t, localTOML(root), "files", putRoute)
	d, ctx := s.disk, context.Background()
	for _, key := range []string{"a", "d/e"} {
		if err := d.Put(ctx, key, strings.NewReader("kept "+key), ""); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		key, existing string
		under         bool
	}{
		{"a/b", "a", false},   // an object used as a directory
		{"a/b/c", "a", false}, // deeper under it
		{"d", "d", true},      // a directory of objects used as an object
	} {
		err := d.Put(ctx, tc.key, strings.NewReader("new"), "")
		var ce *storage.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, storage.ErrConflict) || ce.Existing != tc.existing || ce.Under != tc.under {
			t.Fatalf("put %q: %v (%T); want a ConflictError naming %q", tc.key, err, err, tc.existing)
		}
		var de *problem.DependencyError
		if p, ok := problem.As(err); !ok || p.Status != http.StatusConflict || errors.As(err, &de) {
			t.Fatalf("put %q: problem %+v; want a 409, not a dependency error", tc.key, p)
		}
	}
	if body, _ := readAll(t, d, "a"); body != "kept a" {
		t.Fatalf("a after the conflicts = %q", body)
	}
	if body, _ := readAll(t, d, "d/e"); body != "kept d/e" {
		t.Fatalf("d/e after the conflicts = %q", body)
	}
	if left := temporaryFiles(t, root); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	// Over HTTP: 409 problem+json; the keys (request input) are not echoed.
	r := s.svc.Do(t, http.MethodPut, "/objects/a/b", "new")
	if r.Status != http.StatusConflict || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") ||
		strings.Contains(r.String(), `"a/b"`) || strings.Contains(r.String(), "dependency") {
		t.Fatalf("PUT /objects/a/b = %d %s %s", r.Status, r.Header.Get("Content-Type"), r)
	}

	// A key under an object does not exist, as on S3: not found, not a 503.
	if _, err := d.Get(ctx, "a/b"); !errors.Is(err, storage.ErrNotExist) {
		t.Errorf("get under an object: %v", err)
	}
	if ok, err := d.Exists(ctx, "a/b/c"); ok || err != nil {
		t.Errorf("exists under an object: %v, %v", ok, err)
	}
	if err := d.Delete(ctx, "a/b"); err != nil {
		t.Errorf("delete under an object: %v", err)
	}
	if keys := listKeys(t, d, "a/b/"); len(keys) != 0 {
		t.Errorf("list under an object: %v", keys)
	}

	// An empty directory is no object: Put replaces it.
	if err := os.Mkdir(filepath.Join(root, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(ctx, "empty", strings.NewReader("now an object"), ""); err != nil {
		t.Fatalf("put over an empty directory: %v", err)
	}
	if body, _ := readAll(t, d, "empty"); body != "now an object" {
		t.Fatalf("empty = %q", body)
	}
}
