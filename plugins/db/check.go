package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/readiness"
)

// Check implements framework.Checker: a SELECT 1 through the breaker and the
// bounded ping, under the readiness context. An open breaker is reported
// without I/O; a pool with every connection in use passes without waiting
// for one (see check); a half-open one takes the check as its probe, and when the
// probe is another call's, the check asks the server outside the breaker (see
// checkOutside). A server that cannot be reached and an open breaker (opened by
// such failures) are both reported unreachable, so the verdict holds for the
// whole outage; it takes the replica out of rotation only when
// [plugin.db] critical = true.
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	p.mu.Lock()
	d := p.db
	p.mu.Unlock()
	if d == nil {
		meta := map[string]any{}
		if p.tenants != nil {
			meta["tenant_pools"] = p.tenants.len()
		}
		return readiness.Passed("only tenant pools are configured", meta)
	}
	return d.check(ctx)
}

func (d *DB) meta() map[string]any {
	s := d.pool.Stat()
	b := d.gate.breaker.Snapshot()
	meta := map[string]any{
		"breaker": b.Meta(),
		"pool": map[string]any{
			"acquired": s.AcquiredConns(),
			"idle":     s.IdleConns(),
			"total":    s.TotalConns(),
			"max":      s.MaxConns(),
		},
	}
	if v := d.gate.serverVersion.Load(); v != nil {
		meta["server_version"] = *v
	}
	return meta
}

func (d *DB) check(ctx context.Context) readiness.Report {
	if snap := d.gate.breaker.Snapshot(); snap.State == resilience.StateOpen {
		return readiness.Unreachable(fmt.Sprintf("db unreachable: calls to 'db' are suspended for %.1fs", snap.RetryAfter.Seconds()), d.meta())
	}
	if busy(d.pool.Stat()) {
		// Every connection is in use and none can be opened: the check would
		// queue behind the statements until the readiness timeout. A busy
		// pool says nothing about the server, and the watchdog asks the
		// server whether it is alive while statements run (a hung one opens
		// the breaker, which the next check reports without I/O).
		return readiness.Passed(fmt.Sprintf("db pool busy: all %d connections in use; the server was not asked (the watchdog checks it while statements run)", d.pool.Stat().MaxConns()), d.meta())
	}
	c, _, err := d.acquire(ctx)
	if resilience.ProbeTaken(err) {
		return d.checkOutside(ctx)
	}
	if err != nil {
		cause := err
		var de *problem.DependencyError
		if errors.As(err, &de) && de.Err != nil {
			cause = de.Err
		}
		return readiness.Unreachable("db unreachable: "+redactText(cause.Error()), d.meta())
	}
	_, err = c.Conn().PgConn().Exec(ctx, pingSQL).ReadAll()
	c.Release()
	if err != nil {
		return readiness.Unreachable("db did not answer SELECT 1: "+redactText(err.Error()), d.meta())
	}
	return readiness.Passed("", d.meta())
}

// busy reports whether every connection of the pool is in use: an
// acquisition would wait for one to be given back. Connections still
// opening do not count: on a server that hangs they pile up (each check and
// request starts one that goes on in the background), and waiting on them is
// asking the server.
func busy(s *pgxpool.Stat) bool { return s.AcquiredConns() >= s.MaxConns() }

// checkOutside is the check when the half-open breaker's probe is another
// call's (a request's statement, the idempotency store's, River's): SELECT 1
// on a connection taken from the pool without asking the breaker (an idle
// one, or a new one opened for it), the whole of it bounded by ping_timeout
// and the readiness context. The check must say whether PostgreSQL answers,
// not that something else asked first, and one SELECT 1 per poll is no load
// on a server that is coming back. Its outcome is the check's alone: it is
// reported to no breaker, and only the probe's closes or reopens it. (The
// pool's PrepareConn hook pings the connection on the way out too: it cannot
// tell this acquisition from one of Pool()'s, which it pings all.)
func (d *DB) checkOutside(ctx context.Context) readiness.Report {
	ctx, cancel := context.WithTimeout(ctx, d.gate.pingTimeout)
	defer cancel()
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return readiness.Unreachable("db unreachable: "+redactError(err), d.meta())
	}
	_, err = c.Conn().PgConn().Exec(ctx, pingSQL).ReadAll()
	c.Release()
	if err != nil {
		return readiness.Unreachable("db did not answer SELECT 1: "+redactText(err.Error()), d.meta())
	}
	return readiness.Passed("", d.meta())
}
