package cache

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
)

// sharedURL is the machine's Redis. Tests only touch keys under their own
// prefix and never flush it.
const sharedURL = "redis://127.0.0.1:6379/0"

var prefixSeq atomic.Int64

var unsafeKeyChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// uniquePrefix is a key prefix no other test (or run) uses.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("jfasttest:cache:%s:%d:%d:%d:", unsafeKeyChars.ReplaceAllString(t.Name(), "_"),
		os.Getpid(), time.Now().UnixNano(), prefixSeq.Add(1))
}

// bundle is what a test of a running service needs.
type bundle struct {
	svc    *jfasttest.Service
	cache  *Plugin
	clock  *resilience.TestClock
	prefix string
}

type setupOpts struct {
	url    string // defaults to the shared Redis
	toml   string // extra lines of [plugin.cache]
	routes func(c *Plugin, r chi.Router)
}

// setup starts a service with the cache plugin on a unique key prefix and a test
// clock, and deletes the prefix's keys when the test ends.
// refusedAddr is a loopback address where connections are refused at once
// until the test ends (jfasttest.RefusedAddr holds the port).
func refusedAddr(t testing.TB) string { return jfasttest.RefusedAddr(t) }

func setup(t testing.TB, o setupOpts) bundle {
	t.Helper()
	if o.url == "" {
		o.url = sharedURL
	}
	prefix := uniquePrefix(t)
	if o.url == sharedURL {
		t.Cleanup(func() { deletePrefix(t, prefix) })
	}
	clk := jfasttest.NewClock()
	var got *Plugin
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[app]\nname = \"cachetest\"\n[plugins]\nenabled = [\"observability\", \"cache\"]\n[plugin.cache]\nurl = %q\nkey_prefix = %q\n%s",
			o.url, prefix, o.toml),
		Plugins: []framework.Plugin{New()},
		Clock:   clk,
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := From(app)
			if err != nil {
				return err
			}
			got = c
			if o.routes != nil {
				o.routes(c, r)
			}
			return nil
		},
	})
	return bundle{svc: svc, cache: got, clock: clk, prefix: prefix}
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

// redisServer is a private redis-server the test started (drills.StartRedis);
// only it is ever paused.
type redisServer struct{ *drills.Redis }

// startRedis starts a redis-server on a free loopback port and stops it (by
// its pid) when the test ends.
func startRedis(t *testing.T) *redisServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := drills.StartRedis(ctx)
	if err != nil {
		t.Fatalf("private redis-server: %v (apt-get install redis-server)", err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return &redisServer{r}
}

func (s *redisServer) url() string { return s.URL() }

// pause stops the server with SIGSTOP and waits until every thread is stopped:
// its socket stays open and nothing answers.
func (s *redisServer) pause(t *testing.T) {
	t.Helper()
	if err := s.Pause(); err != nil {
		t.Fatalf("pause redis-server: %v", err)
	}
}

func (s *redisServer) resume(t *testing.T) {
	t.Helper()
	if err := s.Resume(); err != nil {
		t.Fatalf("resume redis-server: %v", err)
	}
}

// testBreaker is a breaker with the plugin's defaults, for tests of the hook alone.
func (p *Plugin) testBreaker() *resilience.Breaker {
	return resilience.NewBreaker(resilience.BreakerOpts{Name: breakerName})
}
