package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/readiness"
)

// Check implements framework.Checker: a SELECT 1 through the breaker and the
// bounded ping, under the readiness context. An open breaker is reported
// without I/O. A server that cannot be reached and an open breaker (opened by
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
	c, err := d.Acquire(ctx)
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
