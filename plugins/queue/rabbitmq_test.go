package queue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// rabbitURL is the machine's RabbitMQ. Tests share it with other suites: every
// App declares its own exchange and queues (random names) and deletes them
// after it stopped; the server itself is never reconfigured.
const rabbitURL = "amqp://guest:guest@127.0.0.1:5672/"

// rabbitOpts are what a test may change about a rabbitmq App.
type rabbitOpts struct {
	url       string // default rabbitURL
	heartbeat string // default "10s"
	clock     resilience.Clock
	routes    func(app *framework.App, r chi.Router) error
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startRabbitApp starts an App with backend = "rabbitmq" on an exchange of its
// own; when the test ends it stops the App and deletes every exchange and queue
// the backend declared.
func startRabbitApp(t testing.TB, cfg queuetest.Config, register func(*queue.Plugin), o rabbitOpts) *jfasttest.Service {
	t.Helper()
	q := queue.New()
	if register != nil {
		register(q)
	}
	// The exchange is named after the test's queue: an App started again on
	// the same queue (the interrupted-job test) finds the same topology.
	exchange := "jt-" + randomHex(6)
	if names := queueNamesIn(cfg.Queue); len(names) > 0 {
		exchange = "jt-" + names[0]
	}
	toml := fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\n%s\n[plugins]\nenabled = [\"queue\"]\n[plugin.queue]\nbackend = \"rabbitmq\"\n%s\n[plugin.queue.rabbitmq]\nurl = %q\nexchange = %q\nqueue_prefix = \"jt.\"\nheartbeat = %q\n",
		cfg.App, cfg.Queue, or(o.url, rabbitURL), exchange, or(o.heartbeat, "10s"))
	svc := jfasttest.Start(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{q}, Clock: o.clock, Routes: o.routes})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = svc.App.Stop(ctx)
		deleteTopology(t, q.Backend())
	})
	return svc
}

// deleteTopology deletes what a rabbitmq backend declared, on the real server.
func deleteTopology(t testing.TB, b queue.Backend) {
	tb, ok := b.(interface{ Topology() []string })
	if !ok {
		t.Errorf("backend %T does not list its topology", b)
		return
	}
	conn, err := amqp.Dial(rabbitURL)
	if err != nil {
		t.Errorf("clean up rabbitmq: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Errorf("clean up rabbitmq: %v", err)
		return
	}
	for _, n := range tb.Topology() {
		kind, name, _ := strings.Cut(n, ":")
		if !strings.HasPrefix(name, "jt") {
			t.Errorf("refusing to delete %s %s: not a test name", kind, name)
			continue
		}
		if kind == "queue" {
			_, err = ch.QueueDelete(name, false, false, false)
		} else {
			err = ch.ExchangeDelete(name, false, false)
		}
		if err != nil {
			t.Errorf("delete %s %s: %v", kind, name, err)
			if ch, err = conn.Channel(); err != nil {
				return
			}
		}
	}
}

func rabbitHarness() queuetest.Harness {
	return queuetest.Harness{
		Backend: "rabbitmq",
		Start: func(t *testing.T, cfg queuetest.Config, register func(*queue.Plugin)) *jfasttest.Service {
			return startRabbitApp(t, cfg, register, rabbitOpts{})
		},
	}
}

func TestConformanceRabbitMQ(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, rabbitHarness())
}

// Each rabbitmq boot rule is refused naming its full key.
func TestRabbitMQBootRules(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, table, env, key, want string }{
		{"bad scheme", "[plugin.queue.rabbitmq]\nurl = \"http://127.0.0.1:5672/\"", "", "plugin.queue.rabbitmq.url", "not amqp or amqps"},
		{"no host", "[plugin.queue.rabbitmq]\nurl = \"amqp:///vhost\"", "", "plugin.queue.rabbitmq.url", "no host"},
		{"guest in production", "", "production", "plugin.queue.rabbitmq.url", "guest/guest"},
		{"guest explicit in production", "[plugin.queue.rabbitmq]\nurl = \"amqp://guest:other@broker:5672/\"", "production", "plugin.queue.rabbitmq.url", "guest/guest"},
		{"no credentials in production", "[plugin.queue.rabbitmq]\nurl = \"amqp://broker:5672/\"", "production", "plugin.queue.rabbitmq.url", "guest/guest"},
		{"exchange with a space", "[plugin.queue.rabbitmq]\nexchange = \"my jobs\"", "", "plugin.queue.rabbitmq.exchange", "letters, digits"},
		{"reserved exchange", "[plugin.queue.rabbitmq]\nexchange = \"amq.direct\"", "", "plugin.queue.rabbitmq.exchange", "reserves"},
		{"empty prefix", "[plugin.queue.rabbitmq]\nqueue_prefix = \"\"", "", "plugin.queue.rabbitmq.queue_prefix", "is empty"},
		{"prefix too long", "[plugin.queue.rabbitmq]\nqueue_prefix = \"" + strings.Repeat("p", 151) + "\"", "", "plugin.queue.rabbitmq.queue_prefix", "at most 150"},
		{"zero connect timeout", "[plugin.queue.rabbitmq]\nconnect_timeout = 0", "", "plugin.queue.rabbitmq.connect_timeout", "positive duration"},
		{"sub-second heartbeat", "[plugin.queue.rabbitmq]\nheartbeat = \"500ms\"", "", "plugin.queue.rabbitmq.heartbeat", "at least 1s"},
		{"negative prefetch", "[plugin.queue.queues.default]\nprefetch = -1", "", "plugin.queue.queues.default.prefetch", "must be positive"},
		{"job timeout past consumer_timeout", "job_timeout = \"30m\"\nrescue_after = \"31m\"", "", "plugin.queue.job_timeout", "consumer_timeout"},
		{"schema", "schema = \"jobs\"", "", "plugin.queue.schema", "PostgreSQL setting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if c.env != "" {
				env["JFAST_APP_ENV"] = c.env
			}
			_, err := jfasttest.New(t, jfasttest.Options{
				TOML:    "[plugins]\nenabled = [\"queue\"]\n[plugin.queue]\nbackend = \"rabbitmq\"\n" + c.table,
				Plugins: []framework.Plugin{queue.New()},
				Env:     env,
			})
			var ce framework.ConfigErrors
			if !errors.As(err, &ce) {
				t.Fatalf("boot error = %v, want configuration errors", err)
			}
			found := false
			for _, e := range ce {
				if e.Key == c.key && strings.Contains(e.Error(), c.want) {
					found = true
				}
				if strings.Contains(e.Error(), "s3cret") {
					t.Fatalf("password in the error: %v", e)
				}
			}
			if !found {
				t.Fatalf("errors = %v, want one for %s containing %q", err, c.key, c.want)
			}
		})
	}
}

// The broker URL is a deploy key: in production the environment's URL, with
// the service's own account, replaces the file's guest one and boots.
func TestRabbitMQURLFromEnvironment(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"queue\"]\n[plugin.queue]\nbackend = \"rabbitmq\"\n[plugin.queue.rabbitmq]\nurl = \"amqp://guest:guest@127.0.0.1:5672/\"\n",
		Plugins: []framework.Plugin{queue.New()},
		Env:     map[string]string{"JFAST_APP_ENV": "production", "JFAST_QUEUE_RABBITMQ__URL": "amqp://orders:s3cret@broker.internal:5672/orders"},
	})
	if err != nil {
		t.Fatalf("boot with the environment's URL = %v", err)
	}
	q, err := queue.From(app)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Config().(*queue.Config).RabbitMQ.URL; got != "amqp://orders:s3cret@broker.internal:5672/orders" {
		t.Fatalf("url = %q, want the environment's", got)
	}
}

// waitRabbitConnected waits until /ready reports the queue healthy: the
// publishing connection is up and the topology declared. An App boots without
// waiting for the broker, so a test whose enqueue_timeout is short waits for
// this before its first enqueue, which would otherwise wait for the
// connection (under load, longer than enqueue_timeout) and fail "not
// connected yet".
func waitRabbitConnected(t testing.TB, svc *jfasttest.Service) {
	t.Helper()
	queuetest.Eventually(t, 30*time.Second, "the queue's rabbitmq connection up (/ready reports the queue healthy)", func() bool {
		return strings.Contains(svc.Get(t, "/ready").String(), `"queue":{"healthy":true`)
	})
}
