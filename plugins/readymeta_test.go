// Package plugins_test holds the tests that compare the plugins with each
// other: what one plugin promises about a shared piece (the breaker keys, the
// /ready breaker meta), every plugin keeps the same way.
package plugins_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/gateway"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
)

// down is an address where nothing listens: every dependency below is
// unreachable, so each check answers at once and the meta is what a plugin
// reports during an outage too.
const down = "127.0.0.1:1"

// TestReadyBreakerMetaHasOneShape boots every plugin with a breaker and checks
// that /ready describes each breaker with the same members.
func TestReadyBreakerMetaHasOneShape(t *testing.T) {
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[app]
name = "shape"
readiness_timeout = "1s"

[plugins]
enabled = ["db", "cache", "http", "queue", "storage", "auth", "grpc", "gateway", "llm"]

[plugin.gateway.routes.billing]
prefix = "/api/billing"
upstream = "billing"

[plugin.llm.providers.openai]
base_url = "http://` + down + `/v1"
model = "m"

[plugin.grpc.upstreams.inventory]
target = "` + down + `"
insecure = true
attempts = 1

[plugin.db]
url = "postgres://postgres@` + down + `/shape"

[plugin.cache]
url = "redis://` + down + `/0"

[plugin.http.upstreams.billing]
base_url = "http://` + down + `"

[plugin.queue]
backend = "postgres"

[plugin.storage]
default = "files"

[plugin.storage.disks.files]
driver = "s3"
bucket = "files"
region = "us-east-1"
endpoint = "http://` + down + `"
access_key = "key"
secret_key = "secret"

[plugin.auth]
mode = "jwks"
jwks_url = "http://` + down + `/jwks.json"
`,
		Plugins: []framework.Plugin{db.New(), cache.New(), jhttp.New(), queue.New(), storage.New(), auth.New(), jgrpc.New(), gateway.New(), llm.New()},
	})
	resp := svc.Get(t, "/ready")
	var body struct {
		Checks map[string]struct {
			Meta map[string]any `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, resp.Body)
	}
	breakers := map[string]map[string]any{}
	for _, plugin := range []string{"db", "cache", "queue", "storage", "auth"} {
		b, ok := body.Checks[plugin].Meta["breaker"].(map[string]any)
		if !ok {
			t.Fatalf("/ready: %s has no breaker meta: %s", plugin, resp.Body)
		}
		breakers[plugin] = b
	}
	up, _ := body.Checks["http"].Meta["upstreams"].(map[string]any)
	billing, _ := up["billing"].(map[string]any)
	b, ok := billing["breaker"].(map[string]any)
	if !ok {
		t.Fatalf("/ready: http upstream billing has no breaker meta: %s", resp.Body)
	}
	breakers["http.billing"] = b
	grpcUp, _ := body.Checks["grpc"].Meta["upstreams"].(map[string]any)
	inventory, _ := grpcUp["inventory"].(map[string]any)
	if b, ok = inventory["breaker"].(map[string]any); !ok {
		t.Fatalf("/ready: grpc upstream inventory has no breaker meta: %s", resp.Body)
	}
	breakers["grpc.inventory"] = b
	routes, _ := body.Checks["gateway"].Meta["routes"].(map[string]any)
	route, _ := routes["billing"].(map[string]any)
	if b, ok = route["breaker"].(map[string]any); !ok {
		t.Fatalf("/ready: gateway route billing has no breaker meta: %s", resp.Body)
	}
	breakers["gateway.billing"] = b
	llmProviders, _ := body.Checks["llm"].Meta["providers"].(map[string]any)
	openai, _ := llmProviders["openai"].(map[string]any)
	if b, ok = openai["breaker"].(map[string]any); !ok {
		t.Fatalf("/ready: llm provider openai has no breaker meta: %s", resp.Body)
	}
	breakers["llm.openai"] = b

	want := []string{"consecutive_failures", "opens", "retry_after", "state", "window_calls", "window_failures"}
	for name, b := range breakers {
		if got := slices.Sorted(maps.Keys(b)); !slices.Equal(got, want) {
			t.Errorf("%s breaker meta members = %s, want %s", name, strings.Join(got, ", "), strings.Join(want, ", "))
		}
		for _, k := range want {
			if k == "state" {
				if _, ok := b[k].(string); !ok {
					t.Errorf("%s breaker meta state = %#v, want a string", name, b[k])
				}
				continue
			}
			if _, ok := b[k].(float64); !ok {
				t.Errorf("%s breaker meta %s = %#v, want a number", name, k, b[k])
			}
		}
	}
}

// TestBreakerKeysValidateAlike sets the same wrong breaker keys in every
// plugin's table and expects the same problems, key for key.
func TestBreakerKeysValidateAlike(t *testing.T) {
	bad := `
breaker_failures = 0
breaker_failure_rate = 1.5
breaker_window = "0s"
breaker_minimum_calls = -1
breaker_cool_down = "-1s"
`
	tables := map[string]string{
		"plugin.db":                     "url = \"postgres://postgres@" + down + "/shape\"\n",
		"plugin.cache":                  "",
		"plugin.http.upstreams.billing": "base_url = \"http://" + down + "\"\n",
		"plugin.grpc.upstreams.billing": "target = \"" + down + "\"\ninsecure = true\nattempts = 1\n",
		"plugin.llm.providers.openai":   "base_url = \"http://" + down + "/v1\"\nmodel = \"m\"\n",
		"plugin.queue":                  "backend = \"postgres\"\n",
		"plugin.storage.disks.files":    "driver = \"s3\"\nbucket = \"files\"\nregion = \"us-east-1\"\n",
		"plugin.auth":                   "mode = \"jwks\"\njwks_url = \"http://" + down + "/jwks.json\"\n",
	}
	var problems map[string]string // key suffix → problem and fix, from the first table
	for _, table := range slices.Sorted(maps.Keys(tables)) {
		toml := "[plugins]\nenabled = [\"db\", \"cache\", \"http\", \"queue\", \"storage\", \"auth\", \"grpc\", \"llm\"]\n[plugin.storage]\ndefault = \"files\"\n"
		toml += "[" + table + "]\n" + tables[table] + bad
		_, err := jfasttest.New(t, jfasttest.Options{
			TOML:    toml,
			Plugins: []framework.Plugin{db.New(), cache.New(), jhttp.New(), queue.New(), storage.New(), auth.New(), jgrpc.New(), llm.New()},
		})
		var errs framework.ConfigErrors
		if !errors.As(err, &errs) {
			t.Fatalf("%s: want configuration errors, got %v", table, err)
		}
		got := map[string]string{}
		for _, e := range errs {
			if rest, ok := strings.CutPrefix(e.Key, table+".breaker_"); ok {
				got[rest] = e.Problem + "; fix: " + e.Fix
			}
		}
		if len(got) != 5 {
			t.Errorf("%s: %d breaker errors, want 5: %v", table, len(got), err)
		}
		if problems == nil {
			problems = got
			continue
		}
		if !maps.Equal(got, problems) {
			t.Errorf("%s: breaker errors differ from the other plugins':\n got %v\nwant %v", table, got, problems)
		}
	}
}
