package db

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// effectiveConfig is what the service's config command prints for app.
func effectiveConfig(t *testing.T, app *framework.App) string {
	t.Helper()
	var b strings.Builder
	if err := app.WriteEffectiveConfig(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// configLine matches the line of key in config's output, with its value and
// its source comment.
func configLine(key, value, source string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` +\= ` + regexp.QuoteMeta(value) + ` +# ` + regexp.QuoteMeta(source) + `$`)
}

// startWithDB starts an App with the db plugin, table in [plugin.db] when not
// empty, and env; it returns the service and the plugin's DB.
func startWithDB(t *testing.T, table string, env map[string]string) (*jfasttest.Service, *DB) {
	t.Helper()
	toml := "[app]\nname = \"dbtest\"\n[plugins]\nenabled = [\"db\"]\n"
	if table != "" {
		toml += "[plugin.db]\n" + table
	}
	var d *DB
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{New()},
		Env:     env,
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			d, err = Get(app)
			return err
		},
	})
	return svc, d
}

// startWithTenant starts an App whose only database setting is
// JFAST_DB_TENANT_URL_TEMPLATE, the private database's URL as a template with
// params added, and returns the service and the pool of the tenant that is
// the private database.
func startWithTenant(t *testing.T, params string) (*jfasttest.Service, *DB) {
	t.Helper()
	template := strings.Replace(testURL(), "/"+testDB+"?", "/{tenant}?", 1) + params
	var tp *TenantPools
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"dbtest\"\n[plugins]\nenabled = [\"db\"]\n",
		Plugins: []framework.Plugin{New()},
		Env:     map[string]string{"JFAST_DB_TENANT_URL_TEMPLATE": template},
		Routes: func(app *framework.App, _ chi.Router) error {
			var err error
			tp, err = Tenants(app)
			return err
		},
	})
	d, err := tp.Get(testDB)
	if err != nil {
		t.Fatal(err)
	}
	return svc, d
}

// A pool_max_conns in the URL, with pool_size set neither in the file nor in
// the environment, is the size of the pool the plugin opens on the real
// server, and config shows it with the URL as its source.
func TestURLPoolMaxConnsIsThePoolSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml string
		env        map[string]string
		source     string
	}{
		{"url from the environment", "", map[string]string{"JFAST_DB_URL": testURL() + "&pool_max_conns=3"}, "url (env JFAST_DB_URL pool_max_conns)"},
		{"url from the file", "url = \"" + testURL() + "&pool_max_conns=3\"\n", map[string]string{}, "url (plugin.db.url pool_max_conns)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, d := startWithDB(t, tc.toml, tc.env)
			if got := d.Pool().Config().MaxConns; got != 3 {
				t.Fatalf("pgxpool MaxConns = %d, want the URL's 3", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var n int
			if err := d.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil || n != 1 {
				t.Fatalf("SELECT 1 through the pool: %d, %v", n, err)
			}
			if got := d.Stat().MaxConns(); got != 3 {
				t.Fatalf("pool stat MaxConns = %d, want 3", got)
			}
			out := effectiveConfig(t, svc.App)
			if !configLine("pool_size", "3", tc.source).MatchString(out) {
				t.Fatalf("config does not show pool_size = 3 from %q:\n%s", tc.source, out)
			}
		})
	}
}

// Without pool_max_conns in the URL, pool_size keeps its default, and an
// explicit pool_size equal to the URL's is accepted and in force.
func TestPoolSizeWithoutOrAgreeingWithTheURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, table string
		want             int32
		source           string
	}{
		{"no size in the url", testURL(), "", 10, "default"},
		{"equal sizes", testURL() + "&pool_max_conns=4", "pool_size = 4\n", 4, "file"},
		{"key=value form", "host=127.0.0.1 port=5432 user=postgres dbname=" + testDB + " sslmode=disable pool_max_conns=2", "", 2, "url (env JFAST_DB_URL pool_max_conns)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, d := startWithDB(t, tc.table, map[string]string{"JFAST_DB_URL": tc.url})
			if got := d.Pool().Config().MaxConns; got != tc.want {
				t.Fatalf("pgxpool MaxConns = %d, want %d", got, tc.want)
			}
			if out := effectiveConfig(t, svc.App); !configLine("pool_size", strconv.Itoa(int(tc.want)), tc.source).MatchString(out) {
				t.Fatalf("config does not show pool_size = %d (%s):\n%s", tc.want, tc.source, out)
			}
		})
	}
}

// A pool_max_conns in tenant_url_template sizes every tenant pool when
// tenant_pool_size is not set.
func TestTenantTemplatePoolMaxConnsIsTheTenantPoolSize(t *testing.T) {
	t.Parallel()
	svc, d := startWithTenant(t, "&pool_max_conns=2")
	if got := d.Pool().Config().MaxConns; got != 2 {
		t.Fatalf("tenant pool MaxConns = %d, want the template's 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var name string
	if err := d.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil || name != testDB {
		t.Fatalf("tenant pool reached %q, %v; want %s", name, err, testDB)
	}
	if out := effectiveConfig(t, svc.App); !configLine("tenant_pool_size", "2", "url (env JFAST_DB_TENANT_URL_TEMPLATE pool_max_conns)").MatchString(out) {
		t.Fatalf("config does not show tenant_pool_size = 2 from the template:\n%s", out)
	}
}

// pool_size set explicitly (file or environment) and a different
// pool_max_conns in the URL refuse the boot, naming both keys and the fix.
func TestPoolSizeDisagreeingWithTheURLIsRefused(t *testing.T) {
	t.Parallel()
	url := testURL() + "&pool_max_conns=3"
	for _, tc := range []struct {
		name, table string
		env         map[string]string
		sizeKey     string
	}{
		{"pool_size in the file", "pool_size = 7\n", map[string]string{"JFAST_DB_URL": url}, "plugin.db.pool_size"},
		{"pool_size in the environment", "", map[string]string{"JFAST_DB_URL": url, "JFAST_DB_POOL_SIZE": "7"}, "plugin.db.pool_size"},
		{"tenant_pool_size", "tenant_url_template = \"postgres://app@db/t_{tenant}?pool_max_conns=3\"\ntenant_pool_size = 7\n", map[string]string{"JFAST_DB_URL": testURL()}, "plugin.db.tenant_pool_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := bootErrors(t, tc.table, tc.env).Only(t, tc.sizeKey)
			if !strings.Contains(e.Problem, "is 7") || !strings.Contains(e.Problem, "pool_max_conns=3") {
				t.Errorf("problem %q does not give both sizes", e.Problem)
			}
			urlKey := "plugin.db.url"
			if tc.sizeKey == "plugin.db.tenant_pool_size" {
				urlKey = "plugin.db.tenant_url_template"
			}
			if !strings.Contains(e.Problem, urlKey) || !strings.Contains(e.Fix, urlKey) || !strings.Contains(e.Fix, "remove "+tc.sizeKey) {
				t.Errorf("%q does not name %s and %s in the fix", e.Error(), urlKey, tc.sizeKey)
			}
		})
	}
}

// The pool settings pgxpool reads from a connection string that a key also
// sets (pool_min_idle_conns, pool_max_conn_lifetime, pool_max_conn_idle_time)
// follow pool_size's rule: with the keys unset the URL's values are the
// pool's, and config shows the URL as their source; a tenant pool takes
// tenant_url_template's lifetimes, and its own pool_min_idle_conns, when url
// has none.
func TestURLPoolSettingsAreInForce(t *testing.T) {
	t.Parallel()
	svc, d := startWithDB(t, "", map[string]string{"JFAST_DB_URL": testURL() + "&pool_min_idle_conns=1&pool_max_conn_lifetime=2h&pool_max_conn_idle_time=5m"})
	pc := d.Pool().Config()
	if pc.MinIdleConns != 1 || pc.MaxConnLifetime != 2*time.Hour || pc.MaxConnIdleTime != 5*time.Minute {
		t.Fatalf("pgxpool has min idle %d, lifetime %s, idle time %s; want the URL's 1, 2h, 5m", pc.MinIdleConns, pc.MaxConnLifetime, pc.MaxConnIdleTime)
	}
	out := effectiveConfig(t, svc.App)
	for _, want := range []*regexp.Regexp{
		configLine("min_idle", "1", "url (env JFAST_DB_URL pool_min_idle_conns)"),
		configLine("max_conn_lifetime", `"2h"`, "url (env JFAST_DB_URL pool_max_conn_lifetime)"),
		configLine("max_conn_idle", `"5m"`, "url (env JFAST_DB_URL pool_max_conn_idle_time)"),
	} {
		if !want.MatchString(out) {
			t.Errorf("config does not match %s:\n%s", want, out)
		}
	}

	svc, td := startWithTenant(t, "&pool_max_conn_lifetime=3h&pool_min_idle_conns=2")
	if tc := td.Pool().Config(); tc.MaxConnLifetime != 3*time.Hour || tc.MinIdleConns != 2 || tc.MaxConnIdleTime != 30*time.Minute {
		t.Fatalf("tenant pool has lifetime %s, min idle %d, idle time %s; want the template's 3h and 2, and the default 30m", tc.MaxConnLifetime, tc.MinIdleConns, tc.MaxConnIdleTime)
	}
	if out := effectiveConfig(t, svc.App); !configLine("max_conn_lifetime", `"3h"`, "url (env JFAST_DB_TENANT_URL_TEMPLATE pool_max_conn_lifetime)").MatchString(out) {
		t.Fatalf("config does not show max_conn_lifetime from the template:\n%s", out)
	}
}

// A setting given two different values is refused at boot, naming both
// places and the way out: the key and url, the key and the tenant template,
// url and the tenant template. Equal values are accepted.
func TestURLPoolSettingsDisagreeingAreRefused(t *testing.T) {
	t.Parallel()
	tpl := "tenant_url_template = \"postgres://app@db/t_{tenant}?pool_max_conn_idle_time=10m\"\n"
	for _, tc := range []struct {
		name, table string
		env         map[string]string
		key, want   string
	}{
		{"max_conn_lifetime and url", "max_conn_lifetime = \"1h\"\n", map[string]string{"JFAST_DB_URL": testURL() + "&pool_max_conn_lifetime=2h"},
			"plugin.db.max_conn_lifetime", "is 1h, and plugin.db.url sets pool_max_conn_lifetime=2h"},
		{"min_idle in the environment and url", "", map[string]string{"JFAST_DB_URL": testURL() + "&pool_min_idle_conns=2", "JFAST_DB_MIN_IDLE": "1"},
			"plugin.db.min_idle", "is 1, and plugin.db.url sets pool_min_idle_conns=2"},
		{"max_conn_idle and the template", tpl + "max_conn_idle = \"5m\"\n", nil,
			"plugin.db.max_conn_idle", "is 5m, and plugin.db.tenant_url_template sets pool_max_conn_idle_time=10m"},
		{"url and the template", tpl, map[string]string{"JFAST_DB_URL": testURL() + "&pool_max_conn_idle_time=20m"},
			"plugin.db.tenant_url_template", "sets pool_max_conn_idle_time=10m, and plugin.db.url sets pool_max_conn_idle_time=20m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := bootErrors(t, tc.table, tc.env).Only(t, tc.key)
			if !strings.Contains(e.Problem, tc.want) || !strings.Contains(e.Problem, "neither may silently win") || !strings.HasPrefix(e.Fix, "keep one") {
				t.Errorf("got %q, want the problem to say %q and a fix", e.Error(), tc.want)
			}
		})
	}
	_, d := startWithDB(t, "max_conn_lifetime = \"90m\"\n", map[string]string{"JFAST_DB_URL": testURL() + "&pool_max_conn_lifetime=1h30m"})
	if got := d.Pool().Config().MaxConnLifetime; got != 90*time.Minute {
		t.Fatalf("lifetime %s, want the agreeing 1h30m", got)
	}
}

// A pool parameter in a connection string whose value its key would refuse
// (a lifetime zero or negative, a negative min idle count) is refused at
// boot, naming the parameter, the key and the way out, instead of being
// ignored for the key's default; with the key set too, the refusal is the
// same (the value is no value to compare with the key's).
func TestURLPoolSettingsOutOfRangeAreRefused(t *testing.T) {
	t.Parallel()
	const lifetime = "pool_max_conn_lifetime, the connection string's plugin.db.max_conn_lifetime: it must be a positive duration, got "
	const idle = "pool_max_conn_idle_time, the connection string's plugin.db.max_conn_idle: it must be a positive duration, got "
	for _, tc := range []struct {
		name, table, query string // query goes on url; with table's tenant_url_template, url is left out
		key, says, fix     string
	}{
		{"lifetime zero", "", "pool_max_conn_lifetime=0s", "plugin.db.url", lifetime + "0s",
			"set pool_max_conn_lifetime=1h in plugin.db.url (or JFAST_DB_URL), or remove it and set plugin.db.max_conn_lifetime"},
		{"lifetime negative", "", "pool_max_conn_lifetime=-5s", "plugin.db.url", lifetime + "-5s", "pool_max_conn_lifetime=1h"},
		{"lifetime zero, the key set", "max_conn_lifetime = \"2h\"\n", "pool_max_conn_lifetime=0s", "plugin.db.url", lifetime + "0s", "pool_max_conn_lifetime=1h"},
		{"idle time zero", "", "pool_max_conn_idle_time=0s", "plugin.db.url", idle + "0s",
			"set pool_max_conn_idle_time=30m in plugin.db.url (or JFAST_DB_URL), or remove it and set plugin.db.max_conn_idle"},
		{"idle time negative", "", "pool_max_conn_idle_time=-1m", "plugin.db.url", idle + "-1m", "pool_max_conn_idle_time=30m"},
		{"min idle negative", "", "pool_min_idle_conns=-1", "plugin.db.url",
			"pool_min_idle_conns, the connection string's plugin.db.min_idle: it must be 0 or more, got -1",
			"set pool_min_idle_conns=0 in plugin.db.url (or JFAST_DB_URL), or remove it and set plugin.db.min_idle"},
		{"template lifetime zero", "tenant_url_template = \"postgres://app@db/t_{tenant}?pool_max_conn_lifetime=0s\"\n", "",
			"plugin.db.tenant_url_template", lifetime + "0s",
			"set pool_max_conn_lifetime=1h in plugin.db.tenant_url_template (or JFAST_DB_TENANT_URL_TEMPLATE)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if tc.query != "" {
				env["JFAST_DB_URL"] = testURL() + "&" + tc.query
			}
			e := bootErrors(t, tc.table, env).Only(t, tc.key)
			if e.Problem != "sets "+tc.says || !strings.Contains(e.Fix, tc.fix) {
				t.Errorf("got %q; want the problem %q and a fix saying %q", e.Error(), "sets "+tc.says, tc.fix)
			}
		})
	}
}
