package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/plugins/db"
)

// TestMigrateThroughTheServiceCommand runs a service's "migrate" command with the
// db plugin and two migrations against a private database: status, up, status,
// down, and a usage mistake.
func TestMigrateThroughTheServiceCommand(t *testing.T) {
	t.Parallel()
	url := privateDatabase(t)
	migrations := fstest.MapFS{
		"001_create_widgets.sql": {Data: []byte("CREATE TABLE widgets (id bigint PRIMARY KEY);\n---- create above / drop below ----\nDROP TABLE widgets;\n")},
		"002_add_name.sql":       {Data: []byte("ALTER TABLE widgets ADD COLUMN name text;\n---- create above / drop below ----\nALTER TABLE widgets DROP COLUMN name;\n")},
	}
	opts := framework.Options{
		Plugins:    []framework.Plugin{db.New(db.WithMigrations(migrations))},
		ConfigText: "[app]\nname = \"widgets\"\n[plugins]\nenabled = [\"observability\", \"db\"]\n",
		Environ:    []string{"JFAST_DB_URL=" + url},
	}
	migrate := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), cli.NewCommand(opts), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	for _, step := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"migrate", "status"}, 0, []string{"db: migrate status", "pending  001 001_create_widgets", "pending  002 002_add_name", "version 0 of 2"}},
		{[]string{"migrate", "up"}, 0, []string{"applied 001 001_create_widgets", "applied 002 002_add_name", "version 2 of 2"}},
		{[]string{"migrate", "up"}, 0, []string{"nothing to do", "version 2 of 2"}},
		{[]string{"migrate", "down"}, 0, []string{"reverted 002 002_add_name", "applied  001 001_create_widgets", "pending  002 002_add_name", "version 1 of 2"}},
		{[]string{"migrate", "sideways"}, 2, nil},
	} {
		code, out, errOut := migrate(step.args...)
		if code != step.code {
			t.Fatalf("%v: exit %d, want %d\nstdout %s\nstderr %s", step.args, code, step.code, out, errOut)
		}
		for _, w := range step.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", step.args, w, out)
			}
		}
		if strings.Contains(out+errOut, url) {
			t.Errorf("%v: the database URL reached the output", step.args)
		}
	}
}

// The jfast binary carries no service's migrations: its migrate says so and
// names the service's own command, after validating the file as check does.
func TestJfastMigrateNamesTheServiceCommand(t *testing.T) {
	t.Parallel()
	opts := framework.Options{
		Plugins:    plugins(),
		StandIn:    true,
		ConfigText: "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"observability\", \"db\"]\n[plugin.db]\nurl = \"postgres://postgres@127.0.0.1:5432/test\"\n",
		Environ:    []string{},
	}
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.NewCommand(opts), []string{"migrate", "up"}, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "run the service's: `orders migrate up`") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 naming `orders migrate up`", code, stdout.String(), stderr.String())
	}
}

// A migration that fails through the service's command: the lines name only
// the migration that committed, the error says "db: migrate up" once and
// names the one that failed, and status then finds it pending.
func TestMigrateFailureThroughTheServiceCommand(t *testing.T) {
	t.Parallel()
	url := privateDatabase(t)
	opts := framework.Options{
		Plugins: []framework.Plugin{db.New(db.WithMigrations(fstest.MapFS{
			"001_a.sql": {Data: []byte("CREATE TABLE a (id int);\n---- create above / drop below ----\nDROP TABLE a;\n")},
			"002_b.sql": {Data: []byte("SELEC oops;\n---- create above / drop below ----\nSELECT 1;\n")},
		}))},
		ConfigText: "[app]\nname = \"widgets\"\n[plugins]\nenabled = [\"observability\", \"db\"]\n",
		Environ:    []string{"JFAST_DB_URL=" + url},
	}
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.NewCommand(opts), []string{"migrate", "up"}, &stdout, &stderr)
	if code != 1 || stdout.String() != "db: migrate up\napplied 001 001_a\n" ||
		!strings.HasPrefix(stderr.String(), "error: db: migrate up: 002_b.sql: ERROR: syntax error") || strings.Count(stderr.String(), "migrate up") != 1 {
		t.Fatalf("up: exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	code = cli.Run(context.Background(), cli.NewCommand(opts), []string{"migrate", "status"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "  applied  001 001_a\n  pending  002 002_b\nversion 1 of 2") {
		t.Fatalf("status: exit %d\nstdout %s", code, stdout.String())
	}
}
