package db

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// bootErrors builds (does not start) an App with [plugin.db] set to table
// and returns its configuration errors.
func bootErrors(t *testing.T, table string, env map[string]string, opts ...Option) jfasttest.Errors {
	t.Helper()
	if env == nil {
		env = map[string]string{"JFAST_DB_URL": testURL()}
	}
	toml := "[plugins]\nenabled = [\"db\"]\n"
	if table != "" {
		toml += "[plugin.db]\n" + table
	}
	return jfasttest.ConfigErrors(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{New(opts...)},
		Env:     env,
	})
}

// One test per boot rule: each bad value stops the boot with an error
// naming its key, and says what is wrong.
func TestBootValidation(t *testing.T) {
	t.Parallel()
	rules := []struct {
		name, table string
		env         map[string]string
		key, says   string
	}{
		{"pool_size zero", "pool_size = 0", nil, "plugin.db.pool_size", "never meant"},
		{"pool_size negative", "pool_size = -3", nil, "plugin.db.pool_size", "at least 1"},
		{"unknown session_timezone", `session_timezone = "Mars/Olympus_Mons"`, nil, "plugin.db.session_timezone", "not a time zone"},
		{"Local is not a zone", `session_timezone = "Local"`, nil, "plugin.db.session_timezone", "not a time zone"},
		{"leap-second zone", `session_timezone = "right/UTC"`, nil, "plugin.db.session_timezone", `"right/UTC" counts leap seconds, which PostgreSQL refuses`},
		{"tenant template without {tenant}", `tenant_url_template = "postgres://app@db/tenants"`, nil, "plugin.db.tenant_url_template", "{tenant}"},
		{"connect_timeout zero", `connect_timeout = "0s"`, nil, "plugin.db.connect_timeout", "positive"},
		{"ping_timeout negative", `ping_timeout = "-1s"`, nil, "plugin.db.ping_timeout", "positive"},
		{"command_timeout negative", `command_timeout = "-5s"`, nil, "plugin.db.command_timeout", "zero (off) or a positive"},
		{"max_conn_lifetime zero", `max_conn_lifetime = 0`, nil, "plugin.db.max_conn_lifetime", "positive"},
		{"max_conn_idle zero", `max_conn_idle = "0s"`, nil, "plugin.db.max_conn_idle", "positive"},
		{"breaker_cool_down zero", `breaker_cool_down = "0s"`, nil, "plugin.db.breaker_cool_down", "positive"},
		{"breaker_failures zero", `breaker_failures = 0`, nil, "plugin.db.breaker_failures", "greater than zero"},
		{"breaker_failure_rate above 1", `breaker_failure_rate = 1.5`, nil, "plugin.db.breaker_failure_rate", "at most 1"},
		{"min_idle above pool_size", "pool_size = 2\nmin_idle = 3", nil, "plugin.db.min_idle", "between 0 and pool_size"},
		{"bad url", "", map[string]string{"JFAST_DB_URL": "postgres://app:hunter2secret@db:notaport/x"}, "plugin.db.url", "not a valid"},
		{"no url", "", map[string]string{}, "plugin.db.url", "not set"},
		{"migrations_table not an identifier", `migrations_table = "x; drop table y"`, nil, "plugin.db.migrations_table", "table name"},
		{"migrate_on_start without migrations", "migrate_on_start = true", nil, "plugin.db.migrate_on_start", "no migrations"},
		{"max_tenant_pools zero", "tenant_url_template = \"postgres://app@db/t_{tenant}\"\nmax_tenant_pools = 0", nil, "plugin.db.max_tenant_pools", "greater than zero"},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			errs := bootErrors(t, r.table, r.env)
			for _, e := range errs {
				if e.Key == r.key {
					if !strings.Contains(e.Problem, r.says) {
						t.Fatalf("%s: %q does not say %q", e.Key, e.Problem, r.says)
					}
					if e.Fix == "" {
						t.Fatalf("%s: no fix given", e.Key)
					}
					if strings.Contains(errs.Error(), "hunter2secret") {
						t.Fatalf("the password is in the boot error:\n%s", errs)
					}
					return
				}
			}
			t.Fatalf("no error for %s; got %v", r.key, errs)
		})
	}
}

// A url or tenant template that does not parse is refused with pgx's
// reason, without the value: it may carry a user, a host and a database
// besides the password.
func TestURLRefusedWithoutItsValue(t *testing.T) {
	t.Parallel()
	for dsn, says := range map[string]string{
		"mysql://appuser:hunter2secret@secret-host.corp/orders":          `the scheme is "mysql", not postgres or postgresql`,
		"host=secret-host.corp password=hunter2secret bogus":             "failed to parse as keyword/value (invalid keyword/value)",
		"postgres://appuser:hunter2secret@secret-host.corp:99999/orders": "invalid port",
		"postgres://appuser@secret-host.corp/orders?sslmode=bogus":       "failed to configure TLS (sslmode is invalid)",
	} {
		errs := bootErrors(t, "", map[string]string{"JFAST_DB_URL": dsn})
		want := "is not a valid PostgreSQL connection string: " + says
		if len(errs) != 1 || errs[0].Key != "plugin.db.url" || errs[0].Problem != want {
			t.Errorf("%s: %v; want plugin.db.url: %s", dsn, errs, want)
		}
		for _, part := range []string{"appuser", "hunter2secret", "secret-host", "orders"} {
			if strings.Contains(errs.Error(), part) {
				t.Errorf("%s: the error holds %q: %s", dsn, part, errs)
			}
		}
	}
	errs := bootErrors(t, `tenant_url_template = "postgres://appuser@secret-host.corp:99999/t_{tenant}"`, map[string]string{})
	if len(errs) != 1 || errs[0].Problem != "is not a valid PostgreSQL connection string: invalid port" || strings.Contains(errs.Error(), "secret-host") {
		t.Errorf("tenant_url_template: %v; want invalid port, without the value", errs)
	}
}

func TestBootValidationAcceptsDefaults(t *testing.T) {
	t.Parallel()
	if errs := bootErrors(t, "", nil); errs != nil {
		t.Fatalf("defaults refused: %v", errs)
	}
	// A template alone (no main url) is a valid setup.
	if errs := bootErrors(t, `tenant_url_template = "postgres://app@db/t_{tenant}"`, map[string]string{}); errs != nil {
		t.Fatalf("tenant-only setup refused: %v", errs)
	}
}

func TestRedactDSN(t *testing.T) {
	t.Parallel()
	cases := []string{
		"postgres://app:s3cr3t-pw@db:5432/x",
		"postgres://app:s3cr%40t-pw@db:5432/x",
		"postgres://app:s3cr@t:pw@db:5432/x",
		"host=db user=app password=s3cr3t-pw dbname=x",
		"host=db user=app password='s3cr3t pw' dbname=x",
		"postgres://app@db:5432/x?sslmode=disable&password=s3cr3t-pw",
	}
	for _, dsn := range cases {
		msg := redactText("failed to connect using " + dsn + ": refused")
		for _, secret := range []string{"s3cr3t", "s3cr%40t", "s3cr@t"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%q: password left in %q", dsn, msg)
			}
		}
		if !strings.Contains(msg, "***") {
			t.Errorf("%q: nothing masked in %q", dsn, msg)
		}
	}
	// A password that is also the user's and the database's name: masked where
	// it stands, and nothing else in the text changes.
	dsn := "postgres://app:app@db:5432/app"
	in := "failed to connect to `user=app database=app` using " + dsn + ": refused"
	want := "failed to connect to `user=app database=app` using postgres://app:***@db:5432/app: refused"
	if got := redactText(in); got != want {
		t.Errorf("redactText(%q)\n = %q\nwant %q", in, got, want)
	}
}
