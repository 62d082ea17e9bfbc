package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	serviceGoMod = "module orders\n\ngo 1.25\n\nrequire github.com/jfastframework/jfast v0.0.0\n\nreplace github.com/jfastframework/jfast => ../jfast\n"
	serviceMain  = "package main\n\nimport \"github.com/jfastframework/jfast/framework/cli\"\n\nfunc main() { _ = cli.Run }\n"
)

func TestIsServiceMain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		files   map[string]string
		service bool
		err     string // what the error holds; "" for none
	}{
		{"service", map[string]string{"go.mod": serviceGoMod, "main.go": serviceMain}, true, ""},
		{"empty file beside the main", map[string]string{"go.mod": serviceGoMod, "main.go": serviceMain, "empty.go": ""},
			false, "empty.go:1:1: expected 'package', found 'EOF'"},
		{"syntax error before package", map[string]string{"go.mod": serviceGoMod, "main.go": serviceMain, "broken.go": "}\npackage main\n"},
			false, "broken.go:1:1: expected 'package', found '}'"},
		{"the main itself broken, go.mod requires jfast", map[string]string{"go.mod": serviceGoMod, "main.go": "}" + serviceMain},
			false, "main.go:1:1: expected 'package'"},
		{"no go.mod, no main, a broken file", map[string]string{"empty.go": ""}, false, ""},
		{"another module, a broken file", map[string]string{"go.mod": "module tools\n", "empty.go": ""}, false, ""},
		{"not a main package", map[string]string{"go.mod": serviceGoMod, "lib.go": "package lib\n"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			service, err := isServiceMain(dir)
			if service != tc.service || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("isServiceMain = %v, %v; want %v, an error holding %q", service, err, tc.service, tc.err)
			}
		})
	}
}

// TestCheckRefusesAServiceWithAFileThatDoesNotParse: jfast check in a
// service's directory where a Go file does not parse says so, exit 1, where it
// used to give its own verdict (ok, exit 0) without building the service.
func TestCheckRefusesAServiceWithAFileThatDoesNotParse(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod": serviceGoMod, "main.go": serviceMain, "empty.go": "",
		"jfast.toml": "[app]\nname = \"orders\"\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	code, stdout, stderr := jfast(t, "check")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "a Go file does not parse") ||
		!strings.Contains(stderr, "empty.go:1:1: expected 'package', found 'EOF'") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if code, _, stderr := jfast(t, "check", "--builtin"); code != 0 {
		t.Fatalf("--builtin: exit %d:\n%s", code, stderr)
	}
}
