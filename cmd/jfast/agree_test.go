package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/db"
)

// TestCheckAndBootAgree runs `jfast check` and a service's boot (New, then
// Start, with every built-in plugin compiled in as a service compiles them) on
// each file of testdata/bad: one file per rule, its first line "# want: KEY".
// Both must refuse it, both naming KEY: what fails at boot and can be known
// from the file fails check first.
func TestCheckAndBootAgree(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".toml"), func(t *testing.T) {
			t.Parallel()
			want := wantKey(t, file)
			code, stdout, stderr := jfast(t, "check", "--config", file)
			if code != 1 || !strings.Contains(stderr, want+":") {
				t.Errorf("check: exit %d, want 1 naming %s\nstdout: %s\nstderr: %s", code, want, stdout, stderr)
			}
			// Every one of these comes from the file: its line says where
			// (a syntax error's key is the place itself).
			located := regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `:[0-9]+:`)
			for _, line := range strings.Split(stderr, "\n") {
				if strings.Contains(line, want+":") && !located.MatchString(line) {
					t.Errorf("check: the error naming %s does not begin with %s:LINE:\n%s", want, file, line)
				}
			}
			err := boot(t, file)
			if err == nil {
				t.Fatalf("boot succeeded; check said:\n%s", stderr)
			}
			if !strings.Contains(err.Error(), want+":") {
				t.Errorf("boot failed without naming %s: %v", want, err)
			}
		})
	}
}

// boot starts a service the way its main does, then stops it.
func boot(t *testing.T, file string) error {
	t.Helper()
	app, err := framework.New(framework.Options{Plugins: plugins(), ConfigFile: file, Environ: []string{}, LogOutput: io.Discard})
	if err != nil {
		return err
	}
	if err := app.Start(context.Background()); err != nil {
		return err
	}
	return app.Stop(context.Background())
}

func wantKey(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		t.Fatalf("%s is empty", file)
	}
	want, ok := strings.CutPrefix(sc.Text(), "# want: ")
	if !ok {
		t.Fatalf("%s: the first line must be \"# want: KEY\"", file)
	}
	return want
}

// TestCheckLeavesCompiledInRulesToTheService: migrate_on_start depends on the
// migrations main passes to db.New. The jfast binary cannot know them, so its
// check says so and exits 0; the service decides: it refuses the file without
// migrations compiled in and accepts it with them.
func TestCheckLeavesCompiledInRulesToTheService(t *testing.T) {
	t.Parallel()
	text := "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"db\"]\n[plugin.db]\nurl = \"postgres://postgres@127.0.0.1:5432/test\"\nmigrate_on_start = true\n"
	file := filepath.Join(t.TempDir(), "jfast.toml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := jfast(t, "check", "--config", file)
	if code != 0 || !strings.Contains(stdout, "plugin.db.migrate_on_start: cannot know here: run `orders check`") {
		t.Fatalf("check: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	opts := framework.Options{ConfigText: text, Environ: []string{}, LogOutput: io.Discard}
	opts.Plugins = []framework.Plugin{db.New()}
	if _, err := framework.New(opts); err == nil || !strings.Contains(err.Error(), "plugin.db.migrate_on_start: is true but the service compiled in no migrations") {
		t.Fatalf("the service without migrations: %v", err)
	}
	opts.Plugins = []framework.Plugin{db.New(db.WithMigrations(fstest.MapFS{"0001_init.up.sql": {Data: []byte("select 1")}}))}
	if _, err := framework.New(opts); err != nil {
		t.Fatalf("the service with migrations: %v", err)
	}
}
