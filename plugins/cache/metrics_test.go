package cache

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// commandSeries are the series of the command metrics, as /metrics shows them.
var commandSeries = []string{
	`jfast_cache_commands_total{outcome="ok"}`,
	`jfast_cache_commands_total{outcome="error"}`,
	`jfast_cache_commands_total{outcome="circuit_open"}`,
	`jfast_cache_command_duration_seconds_count`,
}

// commandCounts reads commandSeries from the service's /metrics.
func commandCounts(t *testing.T, b bundle) map[string]float64 {
	t.Helper()
	body := b.svc.Get(t, "/metrics").String()
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		for _, s := range commandSeries {
			if v, ok := strings.CutPrefix(line, s+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("/metrics: %q: %v", line, err)
				}
				out[s] = f
			}
		}
	}
	for _, s := range commandSeries {
		if _, ok := out[s]; !ok {
			t.Fatalf("/metrics has no %s:\n%s", s, body)
		}
	}
	return out
}

func commandDelta(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for _, s := range commandSeries {
		d[s] = after[s] - before[s]
	}
	return d
}

// Every command through the hook is counted once and timed: a miss and an
// error reply are answers (ok), a pipeline is one command, a blocking command
// is counted but not timed, and the connection's handshake (HELLO, nested in
// the first command) is not counted.
func TestCommandMetricsAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := context.Background()
	before := commandCounts(t, b)
	if err := b.cache.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.cache.Get(ctx, "missing"); err != nil || ok {
		t.Fatalf("GET of a missing key: %v %v", ok, err)
	}
	raw := b.cache.Client()
	if err := raw.LPush(ctx, b.prefix+"list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	var reply redis.Error
	if err := raw.Get(ctx, b.prefix+"list").Err(); !errors.As(err, &reply) {
		t.Fatalf("GET of a list = %v, want WRONGTYPE", err)
	}
	if _, err := raw.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, b.prefix+"n")
		p.Incr(ctx, b.prefix+"n")
		p.Get(ctx, b.prefix+"n")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A blocking command answered: counted, not timed (its time is its wait).
	if err := raw.BRPop(ctx, 10*time.Millisecond, b.prefix+"empty").Err(); err != redis.Nil {
		t.Fatalf("BRPOP of an empty list = %v, want redis.Nil after its wait", err)
	}
	d := commandDelta(before, commandCounts(t, b))
	want := map[string]float64{commandSeries[0]: 6, commandSeries[1]: 0, commandSeries[2]: 0, commandSeries[3]: 5}
	for s, w := range want {
		if d[s] != w {
			t.Errorf("%s went up by %v, want %v (SET, GET miss, LPUSH, WRONGTYPE, one pipeline, BRPOP; all but BRPOP timed)", s, d[s], w)
		}
	}
}

// Commands with nothing listening are errors, timed; once the breaker is
// open they are refused, sent nowhere and not timed.
func TestCommandMetricsErrorsAndRefused(t *testing.T) {
	t.Parallel()
	addr := refusedAddr(t)
	b := setup(t, setupOpts{url: "redis://" + addr + "/0"})
	ctx := context.Background()
	before := commandCounts(t, b)
	failed := 0
	for b.cache.Breaker().Snapshot().State != resilience.StateOpen {
		if failed == 50 {
			t.Fatal("the breaker did not open after 50 refused connections")
		}
		if _, _, err := b.cache.Get(ctx, "k"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET with nothing listening = %v", err)
		}
		failed++
	}
	for range 2 {
		if _, _, err := b.cache.Get(ctx, "k"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET with the breaker open = %v", err)
		}
	}
	d := commandDelta(before, commandCounts(t, b))
	want := map[string]float64{commandSeries[0]: 0, commandSeries[1]: float64(failed), commandSeries[2]: 2, commandSeries[3]: float64(failed)}
	for s, w := range want {
		if d[s] != w {
			t.Errorf("%s went up by %v, want %v (%d failed, then 2 refused)", s, d[s], w, failed)
		}
	}
}
