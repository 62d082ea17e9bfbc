package channels

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
)

// sharedURL is the machine's Redis. Tests use key prefixes of their own and
// never flush it.
const sharedURL = "redis://127.0.0.1:6379/0"

var prefixSeq atomic.Int64

var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// uniquePrefix is a key prefix no other test (or run) uses.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("jfasttest:channels:%s:%d:%d:%d:", unsafeKeyChars.ReplaceAllString(t.Name(), "_"),
		os.Getpid(), time.Now().UnixNano(), prefixSeq.Add(1))
}

// cluster is the shared settings of the replicas of one test: the same Redis,
// key prefix and group, as replicas of one service have.
type cluster struct {
	t      testing.TB
	url    string
	prefix string
	// toml is the [plugin.channels] lines after key_prefix; cacheTOML the
	// [plugin.cache] lines after url.
	toml, cacheTOML string
	clock           *resilience.TestClock
	appTOML         string             // [app] lines
	extra           []framework.Plugin // plugins compiled in besides cache and channels
	enabled         string             // extra names for [plugins] enabled
}

func newCluster(t testing.TB, url, toml string) *cluster {
	t.Helper()
	if url == "" {
		url = sharedURL
	}
	c := &cluster{t: t, url: url, prefix: uniquePrefix(t), toml: toml, clock: jfasttest.NewClock()}
	if url == sharedURL {
		t.Cleanup(func() { deletePrefix(t, c.prefix) })
	}
	return c
}

// replica is one running service of a cluster.
type replica struct {
	svc *jfasttest.Service
	ch  *Plugin
}

// start starts one more replica; routes mounts its routes (and subscribes).
func (c *cluster) start(routes func(ch *Plugin, r chi.Router) error) *replica {
	c.t.Helper()
	rep := &replica{}
	enabled := `"observability", "cache", "channels"`
	if c.enabled != "" {
		enabled += ", " + c.enabled
	}
	plugins := append([]framework.Plugin{cache.New(), New()}, c.extra...)
	rep.svc = jfasttest.Start(c.t, jfasttest.Options{
		TOML: fmt.Sprintf(`[app]
name = "chantest"
shutdown_timeout = "5s"
%s
[plugins]
enabled = [%s]
[plugin.cache]
url = %q
key_prefix = %q
%s
[plugin.channels]
key_prefix = %q
%s
`, c.appTOML, enabled, c.url, c.prefix+"cache:", c.cacheTOML, c.prefix, c.toml),
		Plugins: plugins,
		Clock:   c.clock,
		Routes: func(app *framework.App, r chi.Router) error {
			ch, err := From(app)
			if err != nil {
				return err
			}
			rep.ch = ch
			if routes != nil {
				return routes(ch, r)
			}
			return nil
		},
	})
	return rep
}

// deletePrefix removes every key under prefix from the shared Redis.
func deletePrefix(t testing.TB, prefix string) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("clean up %s*: %v", prefix, err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("clean up %s*: %v", prefix, err)
		}
	}
}

// inbox collects what a handler received.
type inbox struct {
	mu   sync.Mutex
	msgs []Message
	rids []string // the request ID of each handler's context
	ch   chan struct{}
}

func newInbox() *inbox { return &inbox{ch: make(chan struct{}, 1)} }

func (in *inbox) handler(ctx context.Context, m Message) error {
	in.add(ctx, m)
	return nil
}

func (in *inbox) add(ctx context.Context, m Message) {
	in.mu.Lock()
	in.msgs = append(in.msgs, m)
	in.rids = append(in.rids, requestIDOf(ctx))
	in.mu.Unlock()
	select {
	case in.ch <- struct{}{}:
	default:
	}
}

func (in *inbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

func (in *inbox) payloads() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]string, len(in.msgs))
	for i, m := range in.msgs {
		out[i] = string(m.Payload)
	}
	return out
}

func (in *inbox) all() ([]Message, []string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Message(nil), in.msgs...), append([]string(nil), in.rids...)
}

// wait waits until the inbox holds at least n messages.
func (in *inbox) wait(t testing.TB, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for in.len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("inbox holds %d messages after %s, want %d: %q", in.len(), within, n, in.payloads())
		}
		select {
		case <-in.ch:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitFor polls cond until it holds.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// subscribed waits until every subscription of ch reads (and the breaker
// publishes go through is closed).
func subscribed(t testing.TB, ch *Plugin) {
	t.Helper()
	waitFor(t, 10*time.Second, "subscriptions up", func() bool {
		for _, l := range ch.allLoops() {
			if up, _, _, _, _ := l.snapshot(); !up {
				return false
			}
		}
		return ch.Check(context.Background()).Healthy
	})
}

// readyEntry returns the channels entry of /ready.
func readyEntry(t testing.TB, svc *jfasttest.Service) (int, map[string]any) {
	t.Helper()
	r := svc.Get(t, "/ready")
	var body struct {
		Checks map[string]map[string]any `json:"checks"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, r.Body)
	}
	return r.Status, body.Checks["channels"]
}

// redisServer is a private redis-server the test started; only it is ever
// paused or killed.
func startRedis(t *testing.T) *drills.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := drills.StartRedis(ctx)
	if err != nil {
		t.Fatalf("private redis-server: %v (apt-get install redis-server)", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

func elapsed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// lastID returns the ID of the newest entry of the stream at key, or "0-0"
// when it is empty or does not exist.
func lastID(ctx context.Context, client redis.UniversalClient, key string) (string, error) {
	msgs, err := client.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "0-0", nil
	}
	return msgs[0].ID, nil
}
