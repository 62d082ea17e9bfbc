package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework"
)

// shared finds the pool or client of the backend's plugin and, for postgres,
// the db plugin's gated acquire (nil when the db plugin offers none).
func (p *Plugin) shared(app *framework.App) (any, func(context.Context) (*pgxpool.Conn, error), error) {
	switch p.cfg.Backend {
	case "postgres":
		pp, err := framework.Get[framework.DBPool](app, "db")
		if err != nil {
			return nil, nil, fmt.Errorf(`queue: backend "postgres" uses the db plugin's pool (set [plugin.db] url), or set [plugin.queue] backend = "redis": %w`, err)
		}
		pool := pp.Pool()
		if pool == nil {
			return nil, nil, errors.New("queue: the db plugin returned no pool; it must start before the queue plugin")
		}
		return pool, pp.Acquire, nil
	case "redis":
		cp, err := framework.Get[framework.Redis](app, "cache")
		if err != nil {
			return nil, nil, fmt.Errorf(`queue: backend "redis" uses the cache plugin's client (set [plugin.cache] url), or set [plugin.queue] backend = "postgres": %w`, err)
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
