package scenarios_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/channels"
)

// channelsSeen records what a channel's handler got.
type channelsSeen struct {
	mu  sync.Mutex
	ids map[string]int
}

func (s *channelsSeen) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id]++
}

func (s *channelsSeen) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id] > 0
}

// TestDrillChannelsRedisPaused: the channels plugin on a private
// redis-server, paused. GET /publish publishes one message on a durable and
// one on a broadcast channel, which the same service subscribes to. While
// Redis is paused it answers 503 naming channels within command_timeout, then
// at once; /ready is degraded; after the resume the subscriptions resume on
// the same App, every durable message whose publish answered 200 is handled
// (nothing lost), and a broadcast published after the recovery is received.
func TestDrillChannelsRedisPaused(t *testing.T) {
	srv, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	channelsDrill(t, srv, "redis pause (SIGSTOP)", srv.Pause, srv.Resume, true)
}

// TestDrillChannelsRedisKilled: the same with the redis-server killed
// (SIGKILL) and started again, empty (no persistence), on the same port: the
// durable group is made again by itself and every message published after
// the restart is handled. What Redis held when it died is gone with it, so
// this row proves the resumption, not the durability.
func TestDrillChannelsRedisKilled(t *testing.T) {
	srv, err := drills.StartRedis(context.Background())
	if err != nil {
		t.Fatalf("private redis-server: %v", err)
	}
	t.Cleanup(func() { srv.Stop() })
	restart := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Restart(ctx)
	}
	channelsDrill(t, srv, "redis kill + restart empty", srv.Kill, restart, false)
}

// channelsDrill runs the drill; kept says Redis keeps what it held through
// the fault (a pause), so every durable message published with a 200 must be
// handled, not only those published after it.
func channelsDrill(t *testing.T, srv *drills.Redis, fault string, take, give func() error, kept bool) {
	var next atomic.Int64
	var mu sync.Mutex
	var published []string // durable messages whose publish answered 200
	before := 0            // how many of them were published before the fault
	durable := &channelsSeen{ids: map[string]int{}}
	broadcast := &channelsSeen{ids: map[string]int{}}
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nname = \"drill\"\n[plugins]\nenabled = [\"cache\", \"channels\"]\n" + cacheTOML + `
[plugin.channels]
durable = ["orders"]
broadcast = ["news"]
health_check_interval = "300ms"
handler_timeout = "1s"
visibility_timeout = "2s"
`,
		Plugins: []framework.Plugin{cache.New(), channels.New()},
		Env:     map[string]string{"JFAST_CACHE_URL": srv.URL()},
		Routes: func(app *framework.App, r chi.Router) error {
			ch, err := channels.From(app)
			if err != nil {
				return err
			}
			if err := ch.Subscribe("orders", func(ctx context.Context, m channels.Message) error {
				durable.add(string(m.Payload))
				return nil
			}); err != nil {
				return err
			}
			if err := ch.Subscribe("news", func(ctx context.Context, m channels.Message) error {
				broadcast.add(string(m.Payload))
				return nil
			}); err != nil {
				return err
			}
			r.Method(http.MethodGet, "/publish", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				id := strconv.FormatInt(next.Add(1), 10)
				if err := ch.Publish(r.Context(), "orders", []byte(id)); err != nil {
					return err
				}
				mu.Lock()
				published = append(published, id)
				mu.Unlock()
				if err := ch.Publish(r.Context(), "news", []byte(id)); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, id)
			}))
			r.Method(http.MethodGet, "/plain", framework.Handler(okRoute))
			return nil
		},
	})
	t.Cleanup(func() { srv.Resume() })
	run(t, &drills.Drill{
		Dependency: "channels", Fault: fault, BaseURL: svc.URL,
		Route: "/publish", Other: "/plain", Want: http.StatusServiceUnavailable,
		NameValue: "channels", Check: "channels",
		Deadline:    2*300*time.Millisecond + margin, // two publishes, command_timeout each
		ReadyWithin: 5 * time.Second,
		Take: func() error {
			mu.Lock()
			before = len(published)
			mu.Unlock()
			return take()
		},
		Give: give,
	})
	mu.Lock()
	ok := append([]string(nil), published...)
	if !kept {
		ok = ok[before:]
	}
	mu.Unlock()
	defer func() {
		if t.Failed() {
			t.Logf("/ready: %s\nlogs:\n%s", svc.Get(t, "/ready"), svc.Logs())
		}
	}()
	waitUntil(t, 30*time.Second, "every durable message published with a 200 handled", func() bool {
		for _, id := range ok {
			if !durable.has(id) {
				return false
			}
		}
		return true
	})
	// The broadcast subscription resumed too: a message published now arrives.
	resp, err := http.Get(svc.URL + "/publish")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	last := strconv.FormatInt(next.Load(), 10)
	waitUntil(t, 10*time.Second, "a broadcast after the recovery received", func() bool { return broadcast.has(last) })
	t.Logf("%d durable messages published with a 200 (after the fault: %v), every one handled", len(ok), !kept)
}
