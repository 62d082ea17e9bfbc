package readiness_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"time"

	"github.com/jfastframework/jfast/readiness"
)

// A plugin not declared critical whose dependency is unreachable (its breaker
// open) makes the replica degraded: /ready still answers 200.
func ExampleAggregator_Handler() {
	agg := readiness.NewAggregator(2*time.Second,
		readiness.Check{Name: "db", Critical: true, Run: func(ctx context.Context) readiness.Report {
			return readiness.Passed("", nil)
		}},
		readiness.Check{Name: "cache", Run: func(ctx context.Context) readiness.Report {
			return readiness.Unreachable("redis unreachable: calls to 'redis' are suspended for 3.2s",
				map[string]any{"breaker": map[string]any{"state": "open", "retry_after": 3.2}})
		}},
	)
	srv := httptest.NewServer(agg.Handler())
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL + "/ready")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode)
	_, _ = io.Copy(os.Stdout, resp.Body)
	// Output:
	// 200
	// {"status":"degraded","verdict":"degraded","checks":{"cache":{"healthy":false,"status":"fail","detail":"redis unreachable: calls to 'redis' are suspended for 3.2s","critical":false,"meta":{"breaker":{"retry_after":3.2,"state":"open"}}},"db":{"healthy":true,"status":"pass","critical":false}}}
}

// Only a check declared critical that reports its dependency unreachable (or
// does not answer, or panics) makes the result unavailable.
func ExampleAggregator_Run() {
	refused := func(ctx context.Context) readiness.Report {
		return readiness.Unreachable("db unreachable: connection refused", nil)
	}

	notDeclared := readiness.NewAggregator(time.Second, readiness.Check{Name: "db", Run: refused})
	declared := readiness.NewAggregator(time.Second, readiness.Check{Name: "db", Critical: true, Run: refused})

	for _, agg := range []*readiness.Aggregator{notDeclared, declared} {
		res := agg.Run(context.Background())
		fmt.Println(res.Status, res.HTTPStatus(), "critical:", res.Checks["db"].Critical)
	}
	// Output:
	// degraded 200 critical: false
	// unavailable 503 critical: true
}

// A check that does not answer within the timeout is "timeout", not "fail".
func ExampleAggregator_Run_timeout() {
	agg := readiness.NewAggregator(100*time.Millisecond, readiness.Check{
		Name: "billing",
		Run: func(ctx context.Context) readiness.Report {
			<-ctx.Done() // an upstream that accepts the connection and never answers
			return readiness.Unreachable(ctx.Err().Error(), nil)
		},
	})
	r := agg.Run(context.Background()).Checks["billing"]
	fmt.Println(r.Status, r.Detail)
	// Output:
	// timeout no answer within 100ms
}

func ExampleLiveHandler() {
	rec := httptest.NewRecorder()
	readiness.LiveHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/live", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// 200 {"status":"ok"}
}
