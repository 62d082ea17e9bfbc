package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
)

// shared finds the pool or client of the backend's plugin and, for postgres,
// the db plugin's gated acquire (nil when the db plugin offers none).
func (p *Plugin) shared(app *framework.App) (any, func(context.Context) (*pgxpool.Conn, error), error) {
	switch p.cfg.Backend {
	case "postgres":
		pl := app.Plugin("db")
		if pl == nil {
			return nil, nil, errors.New(`queue: backend "postgres" uses the db plugin's pool, and the db plugin is not enabled; add "db" to [plugins] enabled (and set [plugin.db] url), or set [plugin.queue] backend = "redis"`)
		}
		pp, ok := pl.(interface{ Pool() *pgxpool.Pool })
		if !ok {
			return nil, nil, fmt.Errorf("queue: the db plugin (%T) has no Pool() *pgxpool.Pool method", pl)
		}
		pool := pp.Pool()
		if pool == nil {
			return nil, nil, errors.New("queue: the db plugin returned no pool; it must start before the queue plugin")
		}
		g := gatedPoolOf(pl)
		if g == nil || g.Pool() != pool {
			p.log.Warn("queue: the db plugin offers no DB() with Acquire through its breaker; enqueues take connections from its pool directly and wait out enqueue_timeout while its breaker is open", slog.String("db_plugin", fmt.Sprintf("%T", pl)))
			return pool, nil, nil
		}
		return pool, g.Acquire, nil
	case "redis":
		pl := app.Plugin("cache")
		if pl == nil {
			return nil, nil, errors.New(`queue: backend "redis" uses the cache plugin's client, and the cache plugin is not enabled; add "cache" to [plugins] enabled (and set [plugin.cache] url), or set [plugin.queue] backend = "postgres"`)
		}
		cp, ok := pl.(interface{ Client() redis.UniversalClient })
		if !ok {
			return nil, nil, fmt.Errorf("queue: the cache plugin (%T) has no Client() redis.UniversalClient method", pl)
		}
		c := cp.Client()
		if c == nil {
			return nil, nil, errors.New("queue: the cache plugin returned no client; it must start before the queue plugin")
		}
		return c, nil, nil
	case "rabbitmq":
		return nil, nil, nil // its own connections, made by the backend
	}
	return nil, nil, fmt.Errorf("queue: unknown backend %q", p.cfg.Backend)
}

// gatedPool is the db plugin's *db.DB as the queue uses it: Acquire takes a
// connection through the db plugin's connection breaker and bounded ping,
// and answers the db plugin's dependency error (errors.Is resilience.ErrOpen,
// with the cool-down left) at once while that breaker is open.
type gatedPool interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
	Pool() *pgxpool.Pool
}

var (
	gatedPoolType = reflect.TypeFor[gatedPool]()
	errorType     = reflect.TypeFor[error]()
)

// gatedPoolOf returns what the db plugin's DB() method returns (its main
// *db.DB), or nil when it has no such method or DB() returned an error.
// The queue may not import the db plugin (DESIGN §1), so it cannot name
// *db.DB in a type assertion on DB(); it calls DB by reflection, once at
// start, and asserts the result to gatedPool.
func gatedPoolOf(pl any) gatedPool {
	m := reflect.ValueOf(pl).MethodByName("DB")
	if !m.IsValid() {
		return nil
	}
	t := m.Type()
	if t.NumIn() != 0 || t.NumOut() != 2 || !t.Out(0).Implements(gatedPoolType) || t.Out(1) != errorType {
		return nil
	}
	out := m.Call(nil)
	if err, _ := out[1].Interface().(error); err != nil {
		return nil
	}
	g, _ := out[0].Interface().(gatedPool)
	return g
}
