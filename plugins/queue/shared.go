package queue

import (
	"context"
	"errors"
	"fmt"

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
		pp, ok := pl.(dbPlugin)
		if !ok {
			return nil, nil, fmt.Errorf("queue: the db plugin (%T) has no Pool() *pgxpool.Pool and Acquire(context.Context) (*pgxpool.Conn, error) methods", pl)
		}
		pool := pp.Pool()
		if pool == nil {
			return nil, nil, errors.New("queue: the db plugin returned no pool; it must start before the queue plugin")
		}
		return pool, pp.Acquire, nil
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

// dbPlugin is what the queue needs of the db plugin, which it may not import
// (docs/design.md, "Layering"): its main pool, for River, and Acquire, which takes a connection
// through the db plugin's connection breaker and bounded ping and answers the
// db plugin's dependency error (errors.Is resilience.ErrOpen, with the
// cool-down left) at once while that breaker is open.
type dbPlugin interface {
	Pool() *pgxpool.Pool
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}
