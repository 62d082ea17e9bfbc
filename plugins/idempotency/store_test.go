package idempotency

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func countRows(t *testing.T, table string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL(""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Expired rows are deleted in the background once sweep_interval has passed
// on the App clock.
func TestPostgresSweepDeletesExpiredRows(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StorePostgres, toml: "ttl = \"1h\"\nsweep_interval = \"10m\""})
	b.post(t, "/payments", "a", `{}`)
	b.post(t, "/payments", "b", `{}`)
	b.settled("a") // a record's expiry counts from its write, after the answer
	b.settled("b")
	if n := countRows(t, b.table); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	b.clock.Advance(time.Hour)
	b.post(t, "/payments", "c", `{}`) // starts a sweep before it answers
	// The sweep has counted what it deleted once its goroutine is done
	// (nothing else here runs in the background: no claim is released).
	b.idem.sweeps.Wait()
	if n := countRows(t, b.table); n != 1 {
		t.Fatalf("%d rows after the sweep, want 1", n)
	}
	if got := counterValue(t, b.idem.metrics.swept); got != 2 {
		t.Fatalf("swept %v, want 2", got)
	}
}

// A database that accepts connections but does not answer does not hold the
// start: the table's creation goes on in the background, bounded by
// store_timeout (an hour here), and has not given up when Start returned (a
// start that waited would have given up at app.start_timeout, and said so).
func TestStartDoesNotWaitForTheTable(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StorePostgres, proxy: true, blackholed: true, toml: `store_timeout = "1h"`})
	if b.idem.store.(*postgresStore).ensured.Load() {
		t.Fatal("the table was made through a blackholed database")
	}
	if strings.Contains(b.svc.Logs(), "not ready at start") {
		t.Fatalf("Start returned after the table's creation gave up: it waited on the database\nlogs:\n%s", b.svc.Logs())
	}
}

// A database that is down at start does not fail the boot; the table is made
// on first use once it is back.
func TestTableCreatedOnFirstUseWhenTheDatabaseWasDownAtStart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{store: StorePostgres, proxy: true, blackholed: true, toml: `store_timeout = "300ms"`})
	b.idem.sweeps.Wait() // the table's creation, begun at start, has given up
	if !strings.Contains(b.svc.Logs(), "not ready at start") {
		t.Fatalf("no warning at start:\nlogs:\n%s", b.svc.Logs())
	}
	if err := b.proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		b.clock.Advance(16 * time.Second) // past a connection breaker's cool-down
		// A fresh key per attempt: an attempt that timed out may still have
		// taken its key, which then stays held for its lease.
		key := fmt.Sprintf("k%d", i)
		r := b.post(t, "/payments", key, `{}`)
		if r.Status == http.StatusCreated {
			if again := b.post(t, "/payments", key, `{}`); again.Header.Get(HeaderReplayed) != "true" {
				t.Fatalf("no replay after recovery: %d %s", again.Status, again.Body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the route never recovered: %d %s\nlogs:\n%s", r.Status, r.Body, b.svc.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestReadyAndMetrics(t *testing.T) {
	t.Parallel()
	forStores(t, func(t *testing.T, store string) {
		b := setup(t, setupOpts{store: store})
		r := b.svc.Get(t, "/ready")
		if r.Status != 200 || !strings.Contains(string(r.Body), `"idempotency":{"healthy":true`) {
			t.Fatalf("/ready: %d %s", r.Status, r.Body)
		}
		b.post(t, "/payments", "k", `{}`)
		b.post(t, "/payments", "k", `{}`)
		b.post(t, "/payments", "k", `{"x":1}`)
		for outcome, want := range map[string]float64{outcomeExecuted: 1, outcomeReplayed: 1, outcomeMismatch: 1} {
			if got := counterValue(t, b.idem.metrics.requests.WithLabelValues(store, outcome)); got != want {
				t.Errorf("%s: %v, want %v", outcome, got, want)
			}
		}
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
