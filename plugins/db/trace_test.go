package db

import (
	"context"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func startObserved(t *testing.T, enabled string, obs *jfasttest.Observer) *DB {
	t.Helper()
	p := New()
	jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [" + enabled + "]\n",
		Plugins: []framework.Plugin{p, obs},
		Env:     map[string]string{"JFAST_DB_URL": testURL()},
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.db
}

func TestStatementsReachTheDependencyObserver(t *testing.T) {
	t.Parallel()
	obs := &jfasttest.Observer{}
	d := startObserved(t, `"db", "telemetry"`, obs)
	ctx := context.Background()
	var n int
	if err := d.QueryRow(ctx, "SELECT $1::int", 7).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(ctx, "  with x as (select 1) select * from x"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(ctx, "SELEC 1"); err == nil {
		t.Fatal("a syntax error succeeded")
	}
	got := strings.Join(obs.Operations(), "; ")
	for _, want := range []string{"db SELECT failed=false", "db WITH failed=false", "db SELEC failed=true"} {
		if !strings.Contains(got, want) {
			t.Errorf("observed %q, want %q among them", got, want)
		}
	}
	if strings.Contains(got, "$1") || strings.Contains(got, "7") {
		t.Errorf("observed %q: a statement's text or argument was reported", got)
	}
}

func TestNoTracerWithoutTelemetryEnabled(t *testing.T) {
	t.Parallel()
	obs := &jfasttest.Observer{}
	d := startObserved(t, `"db"`, obs) // compiled in, not enabled
	if _, err := d.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if got := obs.Operations(); len(got) != 0 {
		t.Errorf("observed %q with telemetry not enabled", got)
	}
	// The main pool's only tracer is the release timer, with no query
	// tracer inside: statements get an interface call that returns at once.
	if tr, ok := d.pool.Config().ConnConfig.Tracer.(heldTracer); !ok || tr.inner != nil {
		t.Errorf("the pool has a tracer %T %+v with telemetry not enabled, want the release timer alone", d.pool.Config().ConnConfig.Tracer, tr)
	}
}

func TestSQLOperation(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"SELECT 1":                      "SELECT",
		"\n\t insert into t values (1)": "INSERT",
		"(select 1) union (select 2)":   "SELECT",
		"":                              "QUERY",
		"-- comment\nselect 1":          "QUERY",
		"verylongkeywordthatgoeson":     "VERYLONGKEYWORDT",
	} {
		if got := sqlOperation(sql); got != want {
			t.Errorf("sqlOperation(%q) = %q, want %q", sql, got, want)
		}
	}
}
