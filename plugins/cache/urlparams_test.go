package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/jfasttest"
)

// A url parameter jfast sets itself (every wait bounded by command_timeout,
// no command retried, one dial, the caller's deadline honoured) is refused
// when the url gives it another value, by the boot and so by check, naming
// the parameter, both values and the fix, as a disagreeing pool_size is:
// the url's value could not be in force, and is not dropped silently.
func TestURLParamsJfastSetsAreRefusedWhenTheyDiffer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, table string
		env         map[string]string
		param, want string
		timeout     bool
	}{
		{"max_retries", `url = "redis://127.0.0.1:6379/0?max_retries=5"`, nil, "max_retries", "sets max_retries=5, but jfast sets max_retries to -1 (every command is sent once", false},
		{"max_retries 0, go-redis's 3", `url = "redis://127.0.0.1:6379/0?max_retries=0"`, nil, "max_retries", "sets max_retries=0, but jfast sets max_retries to -1", false},
		{"read_timeout", `url = "redis://127.0.0.1:6379/0?read_timeout=30s"`, nil, "read_timeout", "sets read_timeout=30s, but jfast sets read_timeout to command_timeout (1s), which bounds every wait of a command", true},
		{"write_timeout in seconds", `url = "redis://127.0.0.1:6379/0?write_timeout=5"`, nil, "write_timeout", "sets write_timeout=5, but jfast sets write_timeout to command_timeout (1s)", true},
		{"dial_timeout", `url = "redis://127.0.0.1:6379/0?dial_timeout=10s"`, nil, "dial_timeout", "sets dial_timeout=10s", true},
		{"pool_timeout switched off", `url = "redis://127.0.0.1:6379/0?pool_timeout=-1"`, nil, "pool_timeout", "sets pool_timeout=-1", true},
		{"read_timeout against command_timeout", "url = \"redis://127.0.0.1:6379/0?read_timeout=1s\"\ncommand_timeout = \"250ms\"", nil, "read_timeout", "jfast sets read_timeout to command_timeout (250ms)", true},
		{"url in the environment", "", map[string]string{"JFAST_CACHE_URL": "redis://127.0.0.1:6379/0?max_retries=5"}, "max_retries", "sets max_retries=5", false},
		{"cluster dialer_retries", `url = "redis://127.0.0.1:7000?addr=127.0.0.1:7001&dialer_retries=3"`, nil, "dialer_retries", "sets dialer_retries=3, but jfast sets dialer_retries to 1", false},
		{"cluster max_retries", `url = "redis://127.0.0.1:7000?addr=127.0.0.1:7001&max_retries=2"`, nil, "max_retries", "sets max_retries=2", false},
		{"sentinel context_timeout_enabled", `url = "redis://127.0.0.1:26379/0?master_name=mymaster&context_timeout_enabled=false"`, nil, "context_timeout_enabled", "sets context_timeout_enabled=false, but jfast sets context_timeout_enabled to true", false},
		{"sentinel read_timeout", `url = "redis://127.0.0.1:26379/0?master_name=mymaster&read_timeout=3s"`, nil, "read_timeout", "sets read_timeout=3s", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := jfasttest.ConfigErrors(t, options(tc.table, tc.env)).Only(t, "plugin.cache.url")
			if !strings.Contains(e.Problem, tc.want) {
				t.Errorf("problem %q does not say %q", e.Problem, tc.want)
			}
			wantFix := "remove " + tc.param + " from plugin.cache.url (or from JFAST_CACHE_URL)"
			if !strings.HasPrefix(e.Fix, wantFix) {
				t.Errorf("fix %q does not start %q", e.Fix, wantFix)
			}
			if got := strings.Contains(e.Fix, "set plugin.cache.command_timeout"); got != tc.timeout {
				t.Errorf("fix %q names command_timeout: %v, want %v", e.Fix, got, tc.timeout)
			}
		})
	}
}

// Every parameter jfast sets that the url gives another value is refused,
// one error each.
func TestURLParamsJfastSetsAreRefusedEachOne(t *testing.T) {
	t.Parallel()
	errs := jfasttest.ConfigErrors(t, options(`url = "redis://u:hunter22@127.0.0.1:6379/0?max_retries=5&read_timeout=30s&pool_size=3"`, nil))
	for _, param := range []string{"max_retries=5", "read_timeout=30s"} {
		if !errs.Has("plugin.cache.url", "sets "+param) {
			t.Errorf("no error for %s in:\n%v", param, errs)
		}
	}
	if len(errs) != 2 {
		t.Errorf("%d errors, want 2 (pool_size=3 is the pool size, the key being unset):\n%v", len(errs), errs)
	}
	if strings.Contains(errs.Error(), "hunter22") {
		t.Errorf("the url's password is in the errors:\n%v", errs)
	}
}

// A url parameter with jfast's own value is accepted (nothing of it is
// lost), and the client has jfast's settings whatever the url said: a
// client made without the boot's validation still cannot switch the
// deadlines off.
func TestURLParamsJfastSets(t *testing.T) {
	t.Parallel()
	for _, table := range []string{
		`url = "redis://127.0.0.1:6379/0?read_timeout=1s&write_timeout=1&dial_timeout=1000ms&pool_timeout=1s&max_retries=-1"`,
		"url = \"redis://127.0.0.1:6379/0?read_timeout=250ms\"\ncommand_timeout = \"250ms\"",
		`url = "redis://127.0.0.1:7000?addr=127.0.0.1:7001&dialer_retries=1"`,
		`url = "redis://127.0.0.1:26379/0?master_name=mymaster&context_timeout_enabled=true"`,
	} {
		if errs := jfasttest.ConfigErrors(t, options(table, nil)); len(errs) > 0 {
			t.Errorf("%s refused:\n%v", table, errs)
		}
	}

	cfg := defaultConfig()
	cfg.URL = "redis://127.0.0.1:6379/0?read_timeout=30s&write_timeout=30s&pool_timeout=30s&dial_timeout=30s&max_retries=5"
	c, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.ReadTimeout != time.Second || o.WriteTimeout != time.Second || o.PoolTimeout != time.Second || o.DialTimeout != time.Second || o.MaxRetries != 0 {
		t.Errorf("client options = read %s, write %s, pool %s, dial %s, max_retries %d; want command_timeout's 1s and no retry (0 once -1 is read)",
			o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.DialTimeout, o.MaxRetries)
	}
}
