package cache

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func newApp(t *testing.T, table string, env map[string]string) (*framework.App, error) {
	t.Helper()
	return jfasttest.New(t, options(table, env))
}

// options is a service with the cache plugin and table as [plugin.cache].
func options(table string, env map[string]string) jfasttest.Options {
	return jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"cache\"]\n[plugin.cache]\n" + table,
		Plugins: []framework.Plugin{New()},
		Env:     env,
	}
}

// One test per boot rule: each bad value is refused naming its full key, and the
// URL's password never appears in the message.
func TestBootRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, table, key, want string
	}{
		{"http url", `url = "http://127.0.0.1:6379"`, "plugin.cache.url", `redis:// or rediss://`},
		{"unix socket url", `url = "unix:///run/redis.sock"`, "plugin.cache.url", `got scheme "unix"`},
		{"postgres url", `url = "postgres://u:hunter22@db/x"`, "plugin.cache.url", `got scheme "postgres"`},
		{"empty url", `url = ""`, "plugin.cache.url", "must not be empty"},
		{"no host", `url = "redis:///0"`, "plugin.cache.url", "must name a host"},
		{"bad port keeps password out", `url = "redis://u:hunter22@127.0.0.1:notaport/0"`, "plugin.cache.url", "not a valid URL"},
		{"bad db", `url = "redis://u:hunter22@127.0.0.1:6379/zero"`, "plugin.cache.url", "go-redis"},
		{"unknown url option", `url = "redis://127.0.0.1:6379/0?bogus=1"`, "plugin.cache.url", "go-redis"},
		{"zero command timeout", `command_timeout = 0`, "plugin.cache.command_timeout", "positive duration"},
		{"negative command timeout", `command_timeout = "-1s"`, "plugin.cache.command_timeout", "positive duration"},
		{"zero pool size", `pool_size = 0`, "plugin.cache.pool_size", "greater than zero"},
		{"zero pool size in the url", `url = "redis://127.0.0.1:6379/0?pool_size=0"`, "plugin.cache.url", "pool_size=0: must be a whole number of at least 1"},
		{"negative pool size in the url", `url = "redis://127.0.0.1:6379/0?pool_size=-2"`, "plugin.cache.url", "pool_size=-2: must be a whole number of at least 1"},
		{"zero breaker failures", `breaker_failures = 0`, "plugin.cache.breaker_failures", "greater than zero"},
		{"failure rate above one", `breaker_failure_rate = 1.5`, "plugin.cache.breaker_failure_rate", "(0, 1]"},
		{"zero failure rate", `breaker_failure_rate = 0`, "plugin.cache.breaker_failure_rate", "(0, 1]"},
		{"zero window", `breaker_window = 0`, "plugin.cache.breaker_window", "positive duration"},
		{"zero minimum calls", `breaker_minimum_calls = 0`, "plugin.cache.breaker_minimum_calls", "greater than zero"},
		{"zero cool-down", `breaker_cool_down = 0`, "plugin.cache.breaker_cool_down", "positive duration"},
		{"unknown key", `comand_timeout = "1s"`, "plugin.cache.comand_timeout", "command_timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := jfasttest.ConfigErrors(t, options(tc.table, nil)).Only(t, tc.key)
			if msg := e.Error(); !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
			if strings.Contains(e.Error(), "hunter22") {
				t.Errorf("error leaks the password: %v", e)
			}
		})
	}
}

// JFAST_CACHE_URL is a deploy key: it wins over a bad URL in the file.
func TestURLFromEnvironmentWins(t *testing.T) {
	t.Parallel()
	app, err := newApp(t, `url = "http://wrong"`, map[string]string{"JFAST_CACHE_URL": "redis://127.0.0.1:6379/0"})
	if err != nil {
		t.Fatalf("boot refused although JFAST_CACHE_URL is valid: %v", err)
	}
	if src := app.Sources()["plugin.cache.url"]; !strings.Contains(src, "JFAST_CACHE_URL") {
		t.Errorf("plugin.cache.url came from %q, want the environment", src)
	}
	jfasttest.ConfigErrors(t, options(`url = "redis://127.0.0.1:6379/0"`, map[string]string{"JFAST_CACHE_URL": "memcached://127.0.0.1:11211"})).
		Only(t, "plugin.cache.url")
}

// The defaults, and the three kinds of URL go-redis understands: one server,
// Sentinel (master_name) and Cluster (addr). The clients are built without
// connecting, so no sentinel or cluster needs to run.
func TestDefaultsAndURLModes(t *testing.T) {
	t.Parallel()
	p := New()
	if p.cfg.URL != DefaultURL || p.cfg.CommandTimeout != DefaultCommandTimeout || p.cfg.PoolSize <= 0 ||
		p.cfg.BreakerFailures != 5 || p.cfg.BreakerFailureRate != 0.5 || p.cfg.BreakerWindow.Seconds() != 30 ||
		p.cfg.BreakerMinimumCalls != 20 || p.cfg.BreakerCoolDown.Seconds() != 15 {
		t.Errorf("defaults = %+v", p.cfg)
	}
	modes := []struct {
		url  string
		want func(redis.UniversalClient) bool
	}{
		{"redis://127.0.0.1:6379/2", func(c redis.UniversalClient) bool {
			o := c.(*redis.Client).Options()
			return o.DB == 2 && o.ReadTimeout == DefaultCommandTimeout && o.WriteTimeout == DefaultCommandTimeout &&
				o.DialTimeout == DefaultCommandTimeout && o.PoolTimeout == DefaultCommandTimeout &&
				o.MaxRetries == 0 && o.DialerRetries == 1 && o.ContextTimeoutEnabled
		}},
		{"rediss://u:p@127.0.0.1:6380/0", func(c redis.UniversalClient) bool {
			o := c.(*redis.Client).Options()
			return o.TLSConfig != nil && o.Password == "p"
		}},
		{"redis://127.0.0.1:26379/0?master_name=mymaster&addr=127.0.0.1:26380", func(c redis.UniversalClient) bool {
			_, ok := c.(*redis.Client)
			return ok
		}},
		{"redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", func(c redis.UniversalClient) bool {
			cc, ok := c.(*redis.ClusterClient)
			return ok && len(cc.Options().Addrs) == 3 && cc.Options().ReadTimeout == DefaultCommandTimeout
		}},
		{"redis://127.0.0.1:7000?addr=127.0.0.1:7000", func(c redis.UniversalClient) bool {
			_, ok := c.(*redis.ClusterClient) // a one-node cluster: the seed repeated in addr
			return ok
		}},
		{"redis://127.0.0.1:6379/0?read_timeout=1s&write_timeout=1&pool_timeout=1s&dial_timeout=1000ms&max_retries=-1", func(c redis.UniversalClient) bool {
			o := c.(*redis.Client).Options()
			return o.ReadTimeout == DefaultCommandTimeout && o.WriteTimeout == DefaultCommandTimeout && o.PoolTimeout == DefaultCommandTimeout &&
				o.DialTimeout == DefaultCommandTimeout && o.MaxRetries == 0 // the url agrees with jfast: accepted
		}},
	}
	for _, m := range modes {
		if _, err := newApp(t, "url = \""+m.url+"\"", nil); err != nil {
			t.Errorf("%s refused: %v", m.url, err)
			continue
		}
		cfg := defaultConfig()
		cfg.URL = m.url
		c, err := newClient(cfg)
		if err != nil {
			t.Errorf("%s: %v", m.url, err)
			continue
		}
		if !m.want(c) {
			t.Errorf("%s: client %T does not have the expected options", m.url, c)
		}
		_ = c.Close()
	}
}

// key_prefix defaults to app.name + ":"; an explicit empty prefix stays empty.
func TestKeyPrefixDefault(t *testing.T) {
	t.Parallel()
	p := New()
	if _, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"cache\"]\n",
		Plugins: []framework.Plugin{p},
	}); err != nil {
		t.Fatal(err)
	}
	if p.cfg.KeyPrefix != "orders:" {
		t.Errorf("default key_prefix = %q, want %q", p.cfg.KeyPrefix, "orders:")
	}
	p = New()
	if _, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"cache\"]\n[plugin.cache]\nkey_prefix = \"\"\n",
		Plugins: []framework.Plugin{p},
	}); err != nil {
		t.Fatal(err)
	}
	if p.cfg.KeyPrefix != "" {
		t.Errorf("explicit empty key_prefix = %q, want empty", p.cfg.KeyPrefix)
	}
}
