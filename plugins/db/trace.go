package db

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/framework"
)

// queryTracer is the pool's pgx.QueryTracer when a plugin observes
// dependencies (the telemetry plugin): every statement is reported to the
// App's framework.DependencyObserver as "db <OPERATION>" — the statement's
// first keyword (SELECT, INSERT, WITH, ...), never its text or arguments.
// Without an observer there is no query tracer: the main pool's tracer is
// then heldTracer alone, whose query methods return at once.
type queryTracer struct{ observe framework.DependencyObserver }

type queryEndKey struct{}

// newQueryTracer returns the tracer for app, or nil when nothing observes.
func newQueryTracer(app *framework.App) pgx.QueryTracer {
	if observe := framework.DependencyObserverOf(app); observe != nil {
		return queryTracer{observe: observe}
	}
	return nil
}

// TraceQueryStart implements pgx.QueryTracer.
func (t queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	ctx, end := t.observe(ctx, dependencyName, sqlOperation(data.SQL))
	return context.WithValue(ctx, queryEndKey{}, end)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if end, ok := ctx.Value(queryEndKey{}).(func(error)); ok {
		end(data.Err)
	}
}

// sqlOperation is the first keyword of a statement, upper-cased ("QUERY" when
// there is none): a low-cardinality name that carries no value.
func sqlOperation(sql string) string {
	sql = strings.TrimLeft(sql, " \t\r\n(")
	end := 0
	for end < len(sql) && end < 16 {
		c := sql[end]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			break
		}
		end++
	}
	if end == 0 {
		return "QUERY"
	}
	return strings.ToUpper(sql[:end])
}
