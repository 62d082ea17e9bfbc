package plugins_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/internal/roster"
)

// TestEveryPluginIsOnTheRoster fails while a plugin package under plugins/ is
// missing from the one roster of jfast's plugins (internal/roster), which the
// framework's "compile it in" message, the jfast binary and jfast new all read.
func TestEveryPluginIsOnTheRoster(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || !hasPackage(t, e.Name()) {
			continue
		}
		if !roster.Has(e.Name()) {
			t.Errorf("plugins/%s is not on the roster: add %q to roster.Names (internal/roster/roster.go) and its constructor to cmd/jfast/plugins.go (docs/framework.md, \"Adding a plugin\")", e.Name(), e.Name())
		}
	}
	for _, name := range roster.Names {
		if name != "observability" && !hasPackage(t, name) {
			t.Errorf("roster.Names lists %q, but plugins/%s holds no package", name, name)
		}
	}
}

// hasPackage reports whether plugins/dir holds Go files other than tests.
func hasPackage(t *testing.T, dir string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}
