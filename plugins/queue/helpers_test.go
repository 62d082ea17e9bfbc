package queue_test

import (
	"context"
	"fmt"
	"github.com/go-chi/chi/v5"
	"github.com/jfastframework/jfast/plugins/queue"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// pgStandIn stands in for the db plugin (plugins/db, written in parallel): a
// plugin named "db" exposing Pool() over a real pgxpool to the machine's
// PostgreSQL (or a proxy in front of it). It is not a fake server; the queue
// plugin finds it exactly as it finds the db plugin, by name and Pool().
type pgStandIn struct {
	addr string
	pool *pgxpool.Pool
}

func (p *pgStandIn) Name() string { return "db" }
func (p *pgStandIn) Start(ctx context.Context, _ *framework.App) error {
	cfg, err := pgxpool.ParseConfig(pgURL(p.addr))
	if err != nil {
		return err
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.MaxConns = 20
	p.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	return err
}
func (p *pgStandIn) Stop(context.Context) error { p.pool.Close(); return nil }
func (p *pgStandIn) Pool() *pgxpool.Pool        { return p.pool }

// redisStandIn stands in for the cache plugin (plugins/cache): a plugin named
// "cache" exposing Client() over a real go-redis client with the cache plugin's
// 1 s per-command deadlines.
type redisStandIn struct {
	addr string
	c    *redis.Client
}

func (r *redisStandIn) Name() string { return "cache" }
func (r *redisStandIn) Start(context.Context, *framework.App) error {
	r.c = redis.NewClient(&redis.Options{Addr: r.addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	return nil
}
func (r *redisStandIn) Stop(context.Context) error    { return r.c.Close() }
func (r *redisStandIn) Client() redis.UniversalClient { return r.c }

// appOpts are what a test may change about the App a harness starts.
type appOpts struct {
	addr   string // broker address; default the machine's server
	clock  resilience.Clock
	routes func(app *framework.App, r chi.Router) error
}

func startApp(t testing.TB, backend string, cfg queuetest.Config, register func(*queue.Plugin), o appOpts) *jfasttest.Service {
	t.Helper()
	q := queue.New()
	if register != nil {
		register(q)
	}
	var dep framework.Plugin
	switch backend {
	case "postgres":
		dep = &pgStandIn{addr: or(o.addr, "127.0.0.1:5432")}
	case "redis":
		dep = &redisStandIn{addr: or(o.addr, redisAddr)}
		t.Cleanup(func() { deleteRedisQueues(t, cfg) })
	}
	toml := fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\n%s\n[plugins]\nenabled = [%q, \"queue\"]\n[plugin.queue]\nbackend = %q\n%s",
		cfg.App, dep.Name(), backend, cfg.Queue)
	return jfasttest.Start(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{dep, q}, Clock: o.clock, Routes: o.routes})
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// deleteRedisQueues removes the asynq keys of the test's queues from the shared
// Redis (never anything else).
func deleteRedisQueues(t testing.TB, cfg queuetest.Config) {
	c := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range queueNamesIn(cfg.Queue) {
		iter := c.Scan(ctx, 0, "asynq:{"+name+"}:*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.SRem(ctx, "asynq:queues", name)
	}
}

// queueNamesIn finds the [plugin.queue.queues.X] names in a TOML fragment.
func queueNamesIn(toml string) []string {
	var names []string
	const marker = "[plugin.queue.queues."
	for i := 0; ; {
		j := indexFrom(toml, marker, i)
		if j < 0 {
			return names
		}
		k := indexFrom(toml, "]", j)
		names = append(names, toml[j+len(marker):k])
		i = k
	}
}

func indexFrom(s, sub string, from int) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func harness(backend string) queuetest.Harness {
	h := queuetest.Harness{
		Backend: backend,
		Start: func(t *testing.T, cfg queuetest.Config, register func(*queue.Plugin)) *jfasttest.Service {
			return startApp(t, backend, cfg, register, appOpts{})
		},
	}
	if backend == "postgres" {
		h.Begin = func(t *testing.T) pgx.Tx {
			conn, err := pgx.Connect(context.Background(), pgURL("127.0.0.1:5432"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			tx, err := conn.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return tx
		}
	}
	return h
}
