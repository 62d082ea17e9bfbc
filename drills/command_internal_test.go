package drills

import (
	"bytes"
	"slices"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
)

// A plugin declared critical is drilled as critical (its outage must make
// /ready 503); one that is not, as degraded (200). Without the list a drill
// of examples/orders' database ([plugin.db] critical = true) expected a
// degraded 200 and failed on the 503 the service rightly answered.
func TestDrilledPluginsCarryCritical(t *testing.T) {
	app, err := framework.New(framework.Options{
		Plugins: []framework.Plugin{db.New(), cache.New()},
		ConfigText: `[plugins]
enabled = ["observability", "db", "cache"]
[plugin.db]
url = "postgres://postgres@127.0.0.1:5432/test"
critical = true
[plugin.cache]
url = "redis://127.0.0.1:6379/0"
`,
		Environ: []string{},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	drilled, critical := drilledPlugins(app, []framework.Plugin{db.New(), cache.New()}, &out)
	if !slices.Equal(drilled, []string{"db", "cache"}) || !slices.Equal(critical, []string{"db"}) {
		t.Fatalf("drilled %v, critical %v; want [db cache] and [db]", drilled, critical)
	}
}

// A --route starting with / is a path whole, its query string included; only
// plugin=path, whose part before = does not start with /, names a plugin.
// Before, /orders?status=paid was read as the route of a plugin
// "/orders?status", and the drills had no route.
func TestRouteFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, plugin, path string }{
		{"/orders/1", "", "/orders/1"},
		{"/orders?status=paid", "", "/orders?status=paid"},
		{"/orders?status=paid&sku=sku-42", "", "/orders?status=paid&sku=sku-42"},
		{"cache=/stock/sku-42", "cache", "/stock/sku-42"},
		{"db=/orders?status=paid", "db", "/orders?status=paid"},
	} {
		if plugin, path := routeFlag(tc.flag); plugin != tc.plugin || path != tc.path {
			t.Errorf("--route %s: plugin %q, path %q; want %q, %q", tc.flag, plugin, path, tc.plugin, tc.path)
		}
	}
}
