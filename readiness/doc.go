// Package readiness answers the orchestrator's two questions: is the process
// alive ([LiveHandler], /live), and should it receive traffic
// ([Aggregator.Handler], /ready).
//
// Every enabled plugin contributes a [Check]. An [Aggregator] runs all of them
// in parallel under one timeout (app.readiness_timeout, 800 ms by default) and
// folds their [Report]s into a [Result]. One rule decides the answer: the
// result is [Unavailable] (503, a problem+json body) only when a check
// declared critical by config ([plugin.X] critical = true) reports its
// dependency [Unreachable], does not answer in time, or panics. Anything else
// unhealthy is [Degraded] and answers 200, so the orchestrator keeps the
// replica: a shared dependency that is down must
// not take every replica out of rotation at once.
//
// A check that panics, ignores its context, or returns a report with missing
// fields cannot stall /ready or take it down for a non-critical plugin.
//
// # Example
//
//	agg := readiness.NewAggregator(2*time.Second,
//		readiness.Check{Name: "cache", Run: func(ctx context.Context) readiness.Report {
//			if err := rdb.Ping(ctx).Err(); err != nil {
//				return readiness.Unreachable("redis unreachable", nil)
//			}
//			return readiness.Passed("", nil)
//		}},
//	)
//	mux.Handle("GET /live", readiness.LiveHandler())
//	mux.Handle("GET /ready", agg.Handler())
package readiness
