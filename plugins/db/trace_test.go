package db

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// observer stands for the telemetry plugin: it records every operation the
// pool reports through the framework's DependencyObserver seam.
type observer struct {
	mu  sync.Mutex
	ops []string
}

func (o *observer) Name() string { return "telemetry" }

func (o *observer) DependencyObserver() framework.DependencyObserver {
	return func(ctx context.Context, dependency, operation string) (context.Context, func(error)) {
		return ctx, func(err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.ops = append(o.ops, fmt.Sprintf("%s %s failed=%v", dependency, operation, err != nil))
		}
	}
}

func (o *observer) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ops...)
}

func startObserved(t *testing.T, enabled string, obs *observer) *DB {
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
	obs := &observer{}
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
	got := strings.Join(obs.list(), "; ")
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
	obs := &observer{}
	d := startObserved(t, `"db"`, obs) // compiled in, not enabled
	if _, err := d.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if got := obs.list(); len(got) != 0 {
		t.Errorf("observed %q with telemetry not enabled", got)
	}
	if tr := d.pool.Config().ConnConfig.Tracer; tr != nil {
		t.Errorf("the pool has a tracer %T with telemetry not enabled", tr)
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
