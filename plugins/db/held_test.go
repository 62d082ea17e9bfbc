package db

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
)

func heldCount(t *testing.T, p *Plugin) uint64 {
	t.Helper()
	var m dto.Metric
	if err := p.held.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// Every connection taken through the gate is timed once, when it goes back
// to the pool: a statement's, a transaction's, one taken with Acquire. One
// taken from the pool directly is not.
func TestAcquisitionDuration(t *testing.T) {
	t.Parallel()
	pl := New()
	b := setup(t, setupOpts{plugin: pl})
	ctx := context.Background()
	want := heldCount(t, pl)
	step := func(what string, add uint64) {
		t.Helper()
		want += add
		if got := heldCount(t, pl); got != want {
			t.Fatalf("after %s: %d acquisitions timed, want %d", what, got, want)
		}
	}

	var n int
	if err := b.db.QueryRow(ctx, "SELECT 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	step("QueryRow", 1)
	mustExec(t, b.db, "SELECT 1")
	step("Exec", 1)

	rows, err := b.db.Query(ctx, "SELECT generate_series(1, 3)")
	if err != nil {
		t.Fatal(err)
	}
	step("Query with its rows open", 0)
	rows.Close()
	step("the rows closed", 1)

	if err := b.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT 2")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	step("a transaction of two statements", 1)

	c, err := b.db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	step("Acquire, not yet released", 0)
	c.Release()
	step("its Release", 1)

	raw, err := b.db.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw.Release()
	step("an acquisition from the pool directly", 0)

	var m dto.Metric
	if err := pl.held.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.GetHistogram().GetSampleSum() <= 0 {
		t.Fatalf("acquisition times sum to %v, want > 0", m.GetHistogram().GetSampleSum())
	}
}
