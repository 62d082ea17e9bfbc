package cache

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

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

// configLine matches key's line in config's output, with its value and source.
func configLine(key, value, source string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` += ` + regexp.QuoteMeta(value) + ` +# ` + regexp.QuoteMeta(source) + `$`)
}

// A pool_size in the URL, with the pool_size key set neither in the file nor
// in the environment, is the size of the client's pool, and config shows it
// with the URL as its source.
func TestURLPoolSizeIsThePoolSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table string
		env         map[string]string
		source      string
	}{
		{"url from the file", `url = "redis://127.0.0.1:6379/0?pool_size=3"`, nil, "url (plugin.cache.url pool_size)"},
		{"url from the environment", "", map[string]string{"JFAST_CACHE_URL": "redis://127.0.0.1:6379/0?pool_size=3"}, "url (env JFAST_CACHE_URL pool_size)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c *Plugin
			o := options(tc.table, tc.env)
			o.Routes = func(app *framework.App, _ chi.Router) error {
				var err error
				c, err = From(app)
				return err
			}
			svc := jfasttest.Start(t, o)
			client, ok := c.Client().(*redis.Client)
			if !ok {
				t.Fatalf("client is %T, want *redis.Client", c.Client())
			}
			if got := client.Options().PoolSize; got != 3 {
				t.Fatalf("go-redis PoolSize = %d, want the URL's 3", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := client.Ping(ctx).Err(); err != nil {
				t.Fatalf("PING through the client: %v", err)
			}
			if out := effectiveConfig(t, svc.App); !configLine("pool_size", "3", tc.source).MatchString(out) {
				t.Fatalf("config does not show pool_size = 3 from %q:\n%s", tc.source, out)
			}
		})
	}
}

// The URL's pool_size sizes a Redis Cluster client the same way (the client
// is made without connecting, so no cluster is needed).
func TestURLPoolSizeSizesAClusterClient(t *testing.T) {
	t.Parallel()
	var c *Plugin
	o := options(`url = "redis://127.0.0.1:6379?addr=127.0.0.1:6380&pool_size=4"`, nil)
	o.Routes = func(app *framework.App, _ chi.Router) error {
		var err error
		c, err = From(app)
		return err
	}
	jfasttest.Start(t, o)
	client, ok := c.Client().(*redis.ClusterClient)
	if !ok {
		t.Fatalf("client is %T, want *redis.ClusterClient", c.Client())
	}
	if got := client.Options().PoolSize; got != 4 {
		t.Fatalf("cluster PoolSize = %d, want the URL's 4", got)
	}
}

// Without pool_size in the URL the key's default is in force; an explicit
// pool_size equal to the URL's is accepted.
func TestPoolSizeWithoutOrAgreeingWithTheURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table string
		want        int
		source      string
	}{
		{"no size in the url", `url = "redis://127.0.0.1:6379/0"`, defaultConfig().PoolSize, "default"},
		{"equal sizes", "url = \"redis://127.0.0.1:6379/0?pool_size=5\"\npool_size = 5", 5, "file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c *Plugin
			o := options(tc.table, nil)
			o.Routes = func(app *framework.App, _ chi.Router) error {
				var err error
				c, err = From(app)
				return err
			}
			svc := jfasttest.Start(t, o)
			if got := c.Client().(*redis.Client).Options().PoolSize; got != tc.want {
				t.Fatalf("go-redis PoolSize = %d, want %d", got, tc.want)
			}
			if out := effectiveConfig(t, svc.App); !configLine("pool_size", strconv.Itoa(tc.want), tc.source).MatchString(out) {
				t.Fatalf("config does not show pool_size = %d (%s):\n%s", tc.want, tc.source, out)
			}
		})
	}
}

// pool_size set explicitly (file or environment) and a different pool_size in
// the URL refuse the boot, naming both keys and the fix.
func TestPoolSizeDisagreeingWithTheURLIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table string
		env         map[string]string
	}{
		{"both in the file", "url = \"redis://127.0.0.1:6379/0?pool_size=3\"\npool_size = 7", nil},
		{"url in the environment", "pool_size = 7", map[string]string{"JFAST_CACHE_URL": "redis://127.0.0.1:6379/0?pool_size=3"}},
		{"pool_size in the environment", `url = "redis://127.0.0.1:6379/0?pool_size=3"`, map[string]string{"JFAST_CACHE_POOL_SIZE": "7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := jfasttest.ConfigErrors(t, options(tc.table, tc.env)).Only(t, "plugin.cache.pool_size")
			if !strings.Contains(e.Problem, "is 7, and plugin.cache.url sets pool_size=3") {
				t.Errorf("problem %q does not give both sizes and keys", e.Problem)
			}
			if !strings.Contains(e.Fix, "remove pool_size from plugin.cache.url") || !strings.Contains(e.Fix, "remove plugin.cache.pool_size") {
				t.Errorf("fix %q does not name both ways out", e.Fix)
			}
		})
	}
}
