package idempotency

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
)

func configErrors(t *testing.T, toml string) jfasttest.Errors {
	t.Helper()
	return jfasttest.ConfigErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"db\", \"idempotency\"]\n" + toml,
		Plugins: []framework.Plugin{db.New(), New()},
		Env:     map[string]string{"JFAST_DB_URL": testURL("")},
	})
}

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml, key, problem string
	}{
		{"unknown store", `store = "memcached"`, "plugin.idempotency.store", `must be "postgres" or "redis"`},
		{"unknown scope", `scope = "tenant"`, "plugin.idempotency.scope", `must be "caller" or "global"`},
		{"lease not above request_timeout", `lease = "30s"`, "plugin.idempotency.lease", "longer than app.request_timeout"},
		{"zero lease", `lease = 0`, "plugin.idempotency.lease", "positive duration"},
		{"ttl not above lease", "lease = \"2m\"\nttl = \"2m\"", "plugin.idempotency.ttl", "longer than lease"},
		{"zero ttl", `ttl = 0`, "plugin.idempotency.ttl", "positive duration"},
		{"zero store_timeout", `store_timeout = "0s"`, "plugin.idempotency.store_timeout", "positive duration"},
		{"negative retry_after", `retry_after = "-1s"`, "plugin.idempotency.retry_after", "positive duration"},
		{"zero sweep_interval", `sweep_interval = 0`, "plugin.idempotency.sweep_interval", "positive duration"},
		{"table with a dash", `table = "idem-keys"`, "plugin.idempotency.table", "not an identifier"},
		{"table with three parts", `table = "a.b.c"`, "plugin.idempotency.table", "not an identifier"},
		{"table with uppercase", `table = "Idem"`, "plugin.idempotency.table", "not an identifier"},
		{"table with a quote", `table = "x;drop table y"`, "plugin.idempotency.table", "not an identifier"},
		{"zero max_request_body", `max_request_body = 0`, "plugin.idempotency.max_request_body", "greater than zero"},
		{"zero max_response_body", `max_response_body = 0`, "plugin.idempotency.max_response_body", "greater than zero"},
		{"header with a space", `headers = ["Content Type"]`, "plugin.idempotency.headers[0]", "not a header name"},
		{"unknown key", `leas = "5m"`, "plugin.idempotency.leas", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ces := configErrors(t, "[plugin.idempotency]\n"+c.toml+"\n")
			i := slices.IndexFunc(ces, func(e framework.ConfigError) bool { return e.Key == c.key })
			if i < 0 {
				t.Fatalf("no error for %s in %v", c.key, ces)
			}
			if !strings.Contains(ces[i].Problem, c.problem) {
				t.Fatalf("problem %q, want it to say %q", ces[i].Problem, c.problem)
			}
		})
	}
}

// The lease must outlast the request's write deadline (request_timeout + 1s),
// not only its deadline: a lease within that second lets a first request whose
// key was taken over still send its response.
func TestLeaseMustOutlastWriteDeadline(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, app, toml string
		refused         bool
	}{
		{"equal to request_timeout", "", `lease = "30s"`, true},
		{"half a second above", "", `lease = "30.5s"`, true},
		{"exactly request_timeout + 1s", "", `lease = "31s"`, true},
		{"just above request_timeout + 1s", "", `lease = "31001ms"`, false},
		{"default lease, default request_timeout", "", "", false},
		{"default lease, 500ms request_timeout", `request_timeout = "500ms"`, "", false},
		{"default lease, 200ms request_timeout", `request_timeout = "200ms"`, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ces := jfasttest.ConfigErrors(t, jfasttest.Options{
				TOML:    "[app]\n" + c.app + "\n[plugins]\nenabled = [\"db\", \"idempotency\"]\n[plugin.idempotency]\n" + c.toml + "\n",
				Plugins: []framework.Plugin{db.New(), New()},
				Env:     map[string]string{"JFAST_DB_URL": testURL("")},
			})
			i := slices.IndexFunc(ces, func(e framework.ConfigError) bool { return e.Key == "plugin.idempotency.lease" })
			if !c.refused {
				if i >= 0 {
					t.Fatalf("lease refused: %v", ces[i])
				}
				return
			}
			if i < 0 {
				t.Fatalf("no error for plugin.idempotency.lease in %v", ces)
			}
			want := "must be longer than app.request_timeout + 1s (31s)"
			if !strings.Contains(ces[i].Problem, want) {
				t.Fatalf("problem %q, want it to say %q", ces[i].Problem, want)
			}
			if want := `set lease = "2m"`; !strings.Contains(ces[i].Fix, want) {
				t.Fatalf("fix %q, want it to say %q", ces[i].Fix, want)
			}
		})
	}
}

// With app.request_timeout of 6h or more the default lease (4 × it) is a day
// or more: the default ttl becomes 2 × lease, so the boot goes on; a ttl the
// file sets not above the lease is refused with a fix that is longer.
func TestDefaultTTLOutlastsALongLease(t *testing.T) {
	t.Parallel()
	p := New()
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[app]\nrequest_timeout = \"10h\"\n[plugins]\nenabled = [\"db\", \"idempotency\"]\n",
		Plugins: []framework.Plugin{db.New(), p},
		Env:     map[string]string{"JFAST_DB_URL": testURL("")},
	})
	if err != nil {
		t.Fatalf("boot with request_timeout = 10h and the default lease and ttl: %v", err)
	}
	if p.cfg.Lease != 40*time.Hour || p.cfg.TTL != 80*time.Hour {
		t.Fatalf("lease %s, ttl %s; want 40h and 80h", p.cfg.Lease, p.cfg.TTL)
	}
	ces := jfasttest.ConfigErrors(t, jfasttest.Options{
		TOML:    "[app]\nrequest_timeout = \"10h\"\n[plugins]\nenabled = [\"db\", \"idempotency\"]\n[plugin.idempotency]\nttl = \"24h\"\n",
		Plugins: []framework.Plugin{db.New(), New()},
		Env:     map[string]string{"JFAST_DB_URL": testURL("")},
	})
	if len(ces) != 1 || ces[0].Key != "plugin.idempotency.ttl" || !strings.Contains(ces[0].Problem, "must be longer than lease (40h), got 24h") ||
		!strings.HasPrefix(ces[0].Fix, `set ttl = "80h"`) {
		t.Fatalf("errors %v; want ttl refused, with the fix ttl = \"80h\"", ces)
	}
}

func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	ces := configErrors(t, "[plugin.idempotency]\nstore = \"x\"\nttl = 0\ntable = \"-\"\n")
	if len(ces) != 3 {
		t.Fatalf("%d errors, want 3: %v", len(ces), ces)
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	p := New()
	_, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[app]\nname = \"shop\"\nrequest_timeout = \"10s\"\n[plugins]\nenabled = [\"db\", \"idempotency\"]\n",
		Plugins: []framework.Plugin{db.New(), p},
		Env:     map[string]string{"JFAST_DB_URL": testURL("")},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Store: "postgres", Scope: "caller", TTL: 24 * time.Hour, Lease: 40 * time.Second, StoreTimeout: 5 * time.Second,
		Table: "jfast_idempotency_keys", KeyPrefix: "shop:idempotency:", MaxRequestBody: 1 << 20,
		MaxResponseBody: 1 << 20, RetryAfter: time.Second, SweepInterval: time.Minute,
		Headers: []string{"Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified"},
	}
	got := p.cfg
	if !slices.Equal(got.Headers, want.Headers) {
		t.Fatalf("headers %v, want %v", got.Headers, want.Headers)
	}
	got.Headers, want.Headers = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults\n got %+v\nwant %+v", got, want)
	}
}

// The postgres store runs on the db plugin's main pool: a db plugin with
// only tenant_url_template has none, and the configuration is refused (by
// check as by the boot), naming the key and both fixes; with url it is not.
func TestPostgresStoreNeedsTheMainPool(t *testing.T) {
	t.Parallel()
	const tenants = "[plugin.db]\ntenant_url_template = \"postgres://app@127.0.0.1:5432/tenant_{tenant}\"\n"
	cases := []struct {
		name, toml string
		env        map[string]string
		want       string // "" when the configuration is valid
	}{
		{"only tenant_url_template", tenants, nil,
			`plugin.idempotency.store: store "postgres" keeps its keys in the db plugin's database, and the db plugin has no main pool ([plugin.db] has only tenant_url_template, no url); fix: set [plugin.db] url (or JFAST_DB_URL), or set [plugin.idempotency] store = "redis" (with the cache plugin)`},
		{"tenant_url_template and url", tenants, map[string]string{"JFAST_DB_URL": testURL("")}, ""},
		{"tenant_url_template and redis", tenants + "[plugin.idempotency]\nstore = \"redis\"\n", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			es := jfasttest.ConfigErrors(t, jfasttest.Options{
				TOML:    "[plugins]\nenabled = [\"db\", \"cache\", \"idempotency\"]\n" + c.toml,
				Plugins: []framework.Plugin{db.New(), cache.New(), New()},
				Env:     c.env,
			})
			if c.want == "" {
				if len(es) > 0 {
					t.Fatalf("refused: %v", es)
				}
				return
			}
			if e := es.Only(t, "plugin.idempotency.store"); e.Error() != c.want {
				t.Fatalf("error\n %q\nwant\n %q", e, c.want)
			}
		})
	}
}

// The configured store's plugin must be enabled: the configuration is
// refused (by check as by the boot), naming the key and the fix.
func TestStoreWithoutItsPluginIsRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, toml string
		plugins    []framework.Plugin
		want       string
	}{
		{"postgres without db", "[plugins]\nenabled = [\"idempotency\"]\n", []framework.Plugin{db.New(), New()},
			`store "postgres" keeps its keys in the db plugin's database, and plugin "db" is not enabled; fix: add "db" to [plugins] enabled`},
		{"redis without cache", "[plugins]\nenabled = [\"db\", \"idempotency\"]\n[plugin.idempotency]\nstore = \"redis\"\n",
			[]framework.Plugin{db.New(), cache.New(), New()}, `store "redis" keeps its keys in the cache plugin's Redis, and plugin "cache" is not enabled; fix: add "cache" to [plugins] enabled`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: c.toml, Plugins: c.plugins,
				Env: map[string]string{"JFAST_DB_URL": testURL("")}}).Only(t, "plugin.idempotency.store")
			if !strings.Contains(e.Error(), c.want) {
				t.Fatalf("error %q, want it to say %q", e, c.want)
			}
		})
	}
}
