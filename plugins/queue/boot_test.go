package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

func newApp(t *testing.T, table string) (*framework.App, error) {
	t.Helper()
	return jfasttest.New(t, options(table))
}

// options is a service with the queue plugin and table as [plugin.queue],
// beside stand-ins for the plugins its backends run on.
func options(table string) jfasttest.Options {
	return jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"db\", \"cache\", \"queue\"]\n[plugin.queue]\n" + table,
		Plugins: []framework.Plugin{queue.New(), standIn("db"), standIn("cache")},
	}
}

// standIn is a plugin that is only a name, enabled where the queue's rules
// ask whether its backend's plugin is.
type standIn string

func (p standIn) Name() string { return string(p) }

// One test per boot rule: each bad value is refused naming its full key.
func TestBootRules(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, table, key, want string }{
		{"unknown backend", `backend = "kafka"`, "plugin.queue.backend", `unknown backend "kafka"`},
		{"zero job timeout", `job_timeout = 0`, "plugin.queue.job_timeout", "positive duration"},
		{"negative job timeout", `job_timeout = "-1s"`, "plugin.queue.job_timeout", "positive duration"},
		{"zero attempts", `attempts = 0`, "plugin.queue.attempts", "greater than zero"},
		{"the former max_attempts", `max_attempts = 3`, "plugin.queue.max_attempts", `was renamed to "attempts"`},
		{"zero retry base", `retry_base = 0`, "plugin.queue.retry_base", "positive duration"},
		{"retry max below base", `retry_base = "10s"` + "\n" + `retry_max = "1s"`, "plugin.queue.retry_max", "at least retry_base"},
		{"zero dead retention", `dead_retention = 0`, "plugin.queue.dead_retention", "positive duration"},
		{"zero enqueue timeout", `enqueue_timeout = 0`, "plugin.queue.enqueue_timeout", "positive duration"},
		{"zero poll interval", `poll_interval = 0`, "plugin.queue.poll_interval", "positive duration"},
		{"poll interval below River's shortest", `poll_interval = "500us"`, "plugin.queue.poll_interval", `at least 1ms on the postgres backend (River's shortest), got 500µs; fix: set poll_interval = "1ms" or more`},
		{"rescue not above job timeout", `job_timeout = "10m"`, "plugin.queue.rescue_after", "must exceed job_timeout"},
		{"schema not an identifier", `schema = "jobs; drop table users"`, "plugin.queue.schema", "not an identifier"},
		{"schema with a dash", `schema = "my-jobs"`, "plugin.queue.schema", "not an identifier"},
		{"schema on redis", `backend = "redis"` + "\n" + `schema = "jobs"`, "plugin.queue.schema", "PostgreSQL setting"},
		{"queue name", "[plugin.queue.queues.Mail]\nconcurrency = 1", "plugin.queue.queues.Mail", "lowercase"},
		{"zero concurrency", "[plugin.queue.queues.mail]\nconcurrency = 0", "plugin.queue.queues.mail.concurrency", "greater than zero"},
		{"queue name River refuses", "[plugin.queue.queues.orders__high]\nconcurrency = 1", "plugin.queue.queues.orders__high", "not one the postgres backend (River) takes: it must also be " + queue.RiverQueueRule},
		{"queue name over River's 64", "[plugin.queue.queues." + strings.Repeat("q", 65) + "]\nconcurrency = 1", "plugin.queue.queues." + strings.Repeat("q", 65), "not one the postgres backend (River) takes"},
		{"zero breaker failures", `breaker_failures = 0`, "plugin.queue.breaker_failures", "greater than zero"},
		{"negative breaker failures", `breaker_failures = -1`, "plugin.queue.breaker_failures", "greater than zero"},
		{"failure rate above one", `breaker_failure_rate = 1.5`, "plugin.queue.breaker_failure_rate", "(0, 1]"},
		{"zero failure rate", `breaker_failure_rate = 0`, "plugin.queue.breaker_failure_rate", "(0, 1]"},
		{"negative failure rate", `breaker_failure_rate = -0.5`, "plugin.queue.breaker_failure_rate", "(0, 1]"},
		{"zero breaker window", `breaker_window = 0`, "plugin.queue.breaker_window", "positive duration"},
		{"negative breaker window", `breaker_window = "-30s"`, "plugin.queue.breaker_window", "positive duration"},
		{"zero minimum calls", `breaker_minimum_calls = 0`, "plugin.queue.breaker_minimum_calls", "greater than zero"},
		{"negative minimum calls", `breaker_minimum_calls = -20`, "plugin.queue.breaker_minimum_calls", "greater than zero"},
		{"zero cool-down", `breaker_cool_down = 0`, "plugin.queue.breaker_cool_down", "positive duration"},
		{"negative cool-down", `breaker_cool_down = "-15s"`, "plugin.queue.breaker_cool_down", "positive duration"},
		{"unknown key", `job_timout = "1m"`, "plugin.queue.job_timout", "job_timeout"},
		{"unknown breaker key", `breaker_cooldown = "15s"`, "plugin.queue.breaker_cooldown", "breaker_cool_down"},
		{"one-character kind", `kinds = ["ok", "x"]`, "plugin.queue.kinds[1]", `job kind "x" must be ` + queue.KindRule},
		{"kind with a space", `kinds = ["send receipt"]`, "plugin.queue.kinds[0]", `job kind "send receipt" must be ` + queue.KindRule},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := jfasttest.ConfigErrors(t, options(tc.table)).Only(t, tc.key)
			if msg := e.Error(); !strings.Contains(msg, tc.want) {
				t.Fatalf("error = %q, want it to contain %q", msg, tc.want)
			}
		})
	}
}

func TestDefaultsAreValid(t *testing.T) {
	t.Parallel()
	if _, err := newApp(t, ""); err != nil {
		t.Fatal(err)
	}
	d := queue.DefaultConfig()
	if d.JobTimeout.String() != "5m0s" || d.MaxAttempts != 10 || d.EnqueueTimeout.String() != "5s" || d.Backend != "postgres" || !d.Workers {
		t.Fatalf("defaults = %+v", d)
	}
	// docs/design.md: the broker has a breaker, with the framework's defaults.
	if d.BreakerFailures != 5 || d.BreakerFailureRate != 0.5 || d.BreakerWindow != 30*time.Second ||
		d.BreakerMinimumCalls != 20 || d.BreakerCoolDown != 15*time.Second {
		t.Fatalf("breaker defaults = %d, %g, %s, %d, %s", d.BreakerFailures, d.BreakerFailureRate, d.BreakerWindow, d.BreakerMinimumCalls, d.BreakerCoolDown)
	}
}

// The chosen backend's plugin must be enabled: the configuration is refused
// (by check as by the boot), naming the key and the fix.
func TestBackendPluginMissing(t *testing.T) {
	t.Parallel()
	for backend, want := range map[string]string{
		"postgres": `backend "postgres" uses the db plugin's pool, and plugin "db" is not enabled; fix: add "db" to [plugins] enabled`,
		"redis":    `backend "redis" uses the cache plugin's client, and plugin "cache" is not enabled; fix: add "cache" to [plugins] enabled`,
	} {
		e := jfasttest.ConfigErrors(t, jfasttest.Options{
			TOML:    "[plugins]\nenabled = [\"queue\"]\n[plugin.queue]\nbackend = \"" + backend + "\"\n",
			Plugins: []framework.Plugin{queue.New()},
		}).Only(t, "plugin.queue.backend")
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%s: %v, want it to say %s", backend, e, want)
		}
	}
	// rabbitmq runs on its own connections.
	if _, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"queue\"]\n[plugin.queue]\nbackend = \"rabbitmq\"\n",
		Plugins: []framework.Plugin{queue.New()},
	}); err != nil {
		t.Errorf("rabbitmq alone: %v", err)
	}
}

// rescue_after is River's (the postgres backend's): a job_timeout of 6m or
// more on another backend is not refused for it.
func TestRescueAfterIsCheckedOnPostgresOnly(t *testing.T) {
	t.Parallel()
	if _, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"queue\"]\n[plugin.queue]\nbackend = \"rabbitmq\"\njob_timeout = \"20m\"\n",
		Plugins: []framework.Plugin{queue.New()},
	}); err != nil {
		t.Errorf("rabbitmq with job_timeout = 20m: %v", err)
	}
}

// The postgres backend runs on the db plugin's main pool: a db plugin with
// only tenant_url_template has none, and the configuration is refused (by
// check as by the boot), naming the key and both fixes; with url it is not.
func TestPostgresBackendNeedsTheMainPool(t *testing.T) {
	t.Parallel()
	const tenants = "[plugin.db]\ntenant_url_template = \"postgres://app@127.0.0.1:5432/tenant_{tenant}\"\n"
	for _, c := range []struct {
		name, toml string
		want       string // "" when the configuration is valid
	}{
		{"only tenant_url_template", tenants,
			`plugin.queue.backend: backend "postgres" uses the db plugin's pool, and the db plugin has no main pool ([plugin.db] has only tenant_url_template, no url); fix: set [plugin.db] url (or JFAST_DB_URL), or set [plugin.queue] backend = "redis" (with the cache plugin) or "rabbitmq"`},
		{"tenant_url_template and url", tenants + "url = \"postgres://app@127.0.0.1:5432/orders\"\n", ""},
		{"tenant_url_template and rabbitmq", tenants + "[plugin.queue]\nbackend = \"rabbitmq\"\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			es := jfasttest.ConfigErrors(t, jfasttest.Options{
				TOML:    "[plugins]\nenabled = [\"db\", \"queue\"]\n" + c.toml,
				Plugins: []framework.Plugin{db.New(), queue.New()},
			})
			if c.want == "" {
				if len(es) > 0 {
					t.Fatalf("refused: %v", es)
				}
				return
			}
			if e := es.Only(t, "plugin.queue.backend"); e.Error() != c.want {
				t.Fatalf("error\n %q\nwant\n %q", e, c.want)
			}
		})
	}
}

func TestHandleRules(t *testing.T) {
	t.Parallel()
	q := queue.New()
	if err := queue.Handle(q, "bad kind!", func(context.Context, struct{}) error { return nil }); err == nil {
		t.Fatal("kind with a space and ! accepted")
	}
	if err := queue.Handle[struct{}](q, "nil", nil); err == nil {
		t.Fatal("nil handler accepted")
	}
	if err := queue.Handle(q, "ab", func(context.Context, struct{}) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := queue.Handle(q, "ab", func(context.Context, int) error { return nil }); err == nil {
		t.Fatal("second handler for a kind accepted")
	}
}

// A kind of one character is refused when it is registered, naming the kind
// and the rule, on every backend (River, the postgres backend's, would refuse
// it only when its workers start; the rule is the same everywhere so a
// service can change backend); an Enqueue of it is refused at the call.
func TestOneCharacterKindIsRefused(t *testing.T) {
	t.Parallel()
	want := `queue: job kind "d" must be ` + queue.KindRule
	if err := queue.Handle(queue.New(), "d", func(context.Context, struct{}) error { return nil }); err == nil || err.Error() != want {
		t.Fatalf("Handle of a one-character kind = %v, want %q", err, want)
	}
	svc := startApp(t, "postgres", queuetest.Config{Queue: queuetest.QueueTOML(queuetest.QueueName(t), 1, `kinds = ["dd"]`)}, nil, appOpts{})
	q, _ := queue.From(svc.App)
	if _, err := q.Enqueue(context.Background(), "d", struct{}{}); err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, queue.ErrNotEnqueued) {
		t.Fatalf("Enqueue of a one-character kind = %v, want %q, not enqueued", err, want)
	}
}

// A handler registered after the workers started would never run: refused.
func TestHandleAfterWorkersStarted(t *testing.T) {
	t.Parallel()
	name := queuetest.QueueName(t)
	svc := startApp(t, "postgres", queuetest.Config{Queue: queuetest.QueueTOML(name, 1)}, func(q *queue.Plugin) {
		_ = queue.Handle(q, "early", func(context.Context, struct{}) error { return nil })
	}, appOpts{})
	q, _ := queue.From(svc.App)
	queuetest.WorkersRunning(t, svc, 5*time.Second)
	if err := queue.Handle(q, "late", func(context.Context, struct{}) error { return nil }); err == nil || !strings.Contains(err.Error(), "after the workers started") {
		t.Fatalf("late Handle = %v", err)
	}
}

// Workers that cannot start are "failed" on /ready, which is degraded and
// says why, not "starting" for ever while nothing runs the jobs. River
// refuses a queue of more than 10 000 workers (its QueueNumWorkersMax) when
// the worker client is made, a limit the boot does not check.
func TestWorkersThatCannotStartAreFailedOnReady(t *testing.T) {
	t.Parallel()
	name := queuetest.QueueName(t)
	svc := startApp(t, "postgres", queuetest.Config{Queue: queuetest.QueueTOML(name, river.QueueNumWorkersMax+1)}, func(q *queue.Plugin) {
		_ = queue.Handle(q, "dd", func(context.Context, struct{}) error { return nil })
	}, appOpts{})
	queuetest.Eventually(t, 10*time.Second, "workers failed", func() bool {
		return strings.Contains(svc.Get(t, "/ready").String(), `"workers":"failed"`)
	})
	r := svc.Get(t, "/ready").String()
	if !strings.Contains(r, `"status":"degraded"`) || !strings.Contains(r, "queue workers did not start") {
		t.Fatalf("/ready %s: want degraded, saying the workers did not start", r)
	}
}

// A queue's bad name is refused in the words every named table shares;
// the name offered, when there is one, is one the rule accepts (from the
// file and from a variable alike).
func TestBootRefusesBadQueueNameInTheSharedWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		table, key, like string
		env              map[string]string
	}{
		{"[plugin.queue.queues.-ab]\nconcurrency = 1", "plugin.queue.queues.-ab", `"ab" would do; `, nil},
		{"[plugin.queue.queues._ab]\nconcurrency = 1", "plugin.queue.queues._ab", `"ab" would do; `, nil},
		{"[plugin.queue.queues.Mail]\nconcurrency = 1", "plugin.queue.queues.Mail", `"mail" would do; `, nil},
		{"[plugin.queue.queues.\"ünï\"]\nconcurrency = 1", "plugin.queue.queues.ünï", "", nil},
		{"[plugin.queue.queues." + strings.Repeat("q", 101) + "]\nconcurrency = 1", "plugin.queue.queues." + strings.Repeat("q", 101), `"` + strings.Repeat("q", 100) + `" would do; `, nil},
		{"", "plugin.queue.queues.ün", "", map[string]string{"JFAST_QUEUE_QUEUES__ÜN__CONCURRENCY": "2"}},
	} {
		o := options(tc.table)
		o.Env = tc.env
		e := jfasttest.ConfigErrors(t, o).Only(t, tc.key)
		want := "rename it: a name is " + framework.NameRule + " (" + tc.like + "it names the queue in metrics and in JFAST_QUEUE_QUEUES__<NAME>__*)"
		if e.Problem != "is not a valid queue name" || e.Fix != want {
			t.Errorf("%s: %q, want the fix %q", tc.key, e.Error(), want)
		}
	}
}
