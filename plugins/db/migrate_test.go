package db

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// migrations makes two migrations whose tables carry prefix, the first
// slow enough that a second runner really waits on the lock.
func migrations(prefix string) fstest.MapFS {
	return fstest.MapFS{
		"001_create_widgets.sql": {Data: []byte("SELECT pg_sleep(0.3);\nCREATE TABLE " + prefix + "_widgets (id int PRIMARY KEY);\n---- create above / drop below ----\nDROP TABLE " + prefix + "_widgets;\n")},
		"002_create_gadgets.sql": {Data: []byte("CREATE TABLE " + prefix + "_gadgets (id int PRIMARY KEY);\n---- create above / drop below ----\nDROP TABLE " + prefix + "_gadgets;\n")},
	}
}

// migrator builds (without starting) an App whose db plugin has fsys.
func migrator(t *testing.T, table string, fsys fstest.MapFS) *Plugin {
	t.Helper()
	return migratorOn(t, testURL(), table, fsys)
}

// migratorOn is migrator on the database at dbURL.
func migratorOn(t *testing.T, dbURL, table string, fsys fstest.MapFS) *Plugin {
	t.Helper()
	p := New(WithMigrations(fsys))
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"db\"]\n[plugin.db]\nmigrations_table = \"" + table + "\"\n",
		Plugins: []framework.Plugin{p},
		Env:     map[string]string{"JFAST_DB_URL": dbURL},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMigrateTwoConcurrentRunnersApplyOnce(t *testing.T) {
	t.Parallel()
	prefix := "mc_" + suffix()
	fsys := migrations(prefix)
	runners := []*Plugin{migrator(t, "public."+prefix+"_version", fsys), migrator(t, "public."+prefix+"_version", fsys)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reports := make([]MigrationReport, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, p := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = p.Migrate(ctx, MigrateUp)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("runner %d: %v", i, err)
		}
	}
	a, b := len(reports[0].Applied), len(reports[1].Applied)
	if a+b != 2 || (a != 0 && b != 0) {
		t.Fatalf("runners applied %d and %d migrations; want exactly one runner applying both", a, b)
	}
	for _, r := range reports {
		if r.Current != 2 || r.Latest != 2 || r.Pending() != 0 {
			t.Fatalf("report %+v", r)
		}
	}

	r, err := runners[0].Migrate(ctx, MigrateDown)
	if err != nil || r.Current != 1 || len(r.Applied) != 1 || r.Applied[0].Name != "002_create_gadgets" {
		t.Fatalf("down: %+v, %v", r, err)
	}
	r, err = runners[1].Migrate(ctx, MigrateStatus)
	if err != nil || r.Current != 1 || r.Pending() != 1 || len(r.Applied) != 0 || !r.Migrations[0].Applied || r.Migrations[1].Applied {
		t.Fatalf("status: %+v, %v", r, err)
	}
}

func TestRunMigrationsForTheCommand(t *testing.T) {
	t.Parallel()
	prefix := "mr_" + suffix()
	p := migrator(t, "public."+prefix+"_version", migrations(prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	if err := p.RunMigrations(ctx, "up", &out); err != nil {
		t.Fatal(err)
	}
	want := "applied 001 001_create_widgets\napplied 002 002_create_gadgets\n  applied  001 001_create_widgets\n  applied  002 002_create_gadgets\nversion 2 of 2 (public." + prefix + "_version)\n"
	if out.String() != want {
		t.Fatalf("up wrote:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	if err := p.RunMigrations(ctx, "down", &out); err != nil || !strings.HasPrefix(out.String(), "reverted 002 002_create_gadgets\n") {
		t.Fatalf("down: %v\n%s", err, out.String())
	}
	if err := p.RunMigrations(ctx, "sideways", &out); err == nil {
		t.Fatal("an unknown direction was accepted")
	}
}

func TestMigrateOnStart(t *testing.T) {
	t.Parallel()
	prefix := "ms_" + suffix()
	b := setup(t, setupOpts{plugin: New(WithMigrations(migrations(prefix))), toml: "migrate_on_start = true\nmigrations_table = \"public." + prefix + "_version\""})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.db.Exec(ctx, "INSERT INTO "+prefix+"_gadgets VALUES (1)"); err != nil {
		t.Fatalf("the migrated table is not there: %v", err)
	}
	if !strings.Contains(b.svc.Logs(), "db: migrating") {
		t.Fatalf("migrations not logged:\n%s", b.svc.Logs())
	}
}

func TestParseMigrateAction(t *testing.T) {
	t.Parallel()
	for _, a := range []MigrateAction{MigrateUp, MigrateDown, MigrateStatus} {
		if got, err := ParseMigrateAction(a.String()); err != nil || got != a {
			t.Fatalf("%s: %v %v", a, got, err)
		}
	}
	if _, err := ParseMigrateAction("sideways"); err == nil {
		t.Fatal("sideways accepted")
	}
}

// Status reads the version and creates nothing: not the version table on a
// database never migrated (nor its schema), and it needs no CREATE privilege.
func TestMigrateStatusCreatesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table string
		noCreate    bool
	}{
		{"default table", "public.schema_version", false},
		{"schema that does not exist", "audit.schema_version", false},
		{"role without create", "public.schema_version", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			dbURL := jfasttest.NewDatabase(t, "dbmig").URL()
			runAs := dbURL
			if tc.noCreate {
				runAs = roleWithoutCreate(t, dbURL)
			}
			var out strings.Builder
			if err := migratorOn(t, runAs, tc.table, migrations("st")).RunMigrations(ctx, "status", &out); err != nil {
				t.Fatalf("status: %v\n%s", err, out.String())
			}
			want := "  pending  001 001_create_widgets\n  pending  002 002_create_gadgets\nversion 0 of 2 (" + tc.table + ")\n"
			if out.String() != want {
				t.Fatalf("status wrote:\n%s\nwant:\n%s", out.String(), want)
			}
			if created := queryText(t, dbURL, "SELECT to_regclass($1)::text", tc.table); created != nil {
				t.Fatalf("status created %s", *created)
			}
		})
	}
}

// roleWithoutCreate makes a login role that may not create anything in
// the database at dbURL (dropped when the test ends) and returns dbURL as it.
func roleWithoutCreate(t *testing.T, dbURL string) string {
	t.Helper()
	role := "jfast_mig_" + suffix()
	queryText(t, dbURL, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
	queryText(t, dbURL, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { queryText(t, adminURL, "DROP ROLE IF EXISTS "+role) })
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return u.String()
}

// queryText runs sql on its own connection to dbURL and returns the first
// column of its row, nil for NULL or no row.
func queryText(t *testing.T, dbURL, sql string, args ...any) *string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s *string
	if err := conn.QueryRow(ctx, sql, args...).Scan(&s); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

// A migration that fails is not reported applied: the report and the
// command's lines name only the migrations that committed before it, the
// version stays at the last of them, and the error names the migration.
func TestMigrateReportsOnlyWhatCommitted(t *testing.T) {
	t.Parallel()
	prefix := "mf_" + suffix()
	fsys := fstest.MapFS{
		"001_a.sql": {Data: []byte("CREATE TABLE " + prefix + "_a (id int);\n---- create above / drop below ----\nDROP TABLE " + prefix + "_a;\n")},
		"002_b.sql": {Data: []byte("SELEC oops;\n---- create above / drop below ----\nSELECT 1;\n")},
		"003_c.sql": {Data: []byte("CREATE TABLE " + prefix + "_c (id int);\n---- create above / drop below ----\nDROP TABLE " + prefix + "_c;\n")},
	}
	p := migrator(t, "public."+prefix+"_version", fsys)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	err := p.RunMigrations(ctx, "up", &out)
	// The command puts "db: migrate up: " in front of the error itself.
	if err == nil || !strings.HasPrefix(err.Error(), "002_b.sql: ") || out.String() != "applied 001 001_a\n" {
		t.Fatalf("up: %v; wrote:\n%s\nwant the error of 002_b.sql after \"applied 001 001_a\" alone", err, out.String())
	}
	r, err := p.Migrate(ctx, MigrateUp)
	if err == nil || !strings.HasPrefix(err.Error(), "db: migrate up: 002_b.sql: ") || strings.Count(err.Error(), "migrate up") != 1 || len(r.Applied) != 0 {
		t.Fatalf("up again: %+v, %v", r, err)
	}
	r, err = p.Migrate(ctx, MigrateStatus)
	if err != nil || r.Current != 1 || r.Pending() != 2 || !r.Migrations[0].Applied || r.Migrations[1].Applied {
		t.Fatalf("status: %+v, %v", r, err)
	}
}
