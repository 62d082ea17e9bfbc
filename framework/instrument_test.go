package framework_test

import (
	"context"
	"io"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

type instrumenter struct {
	calls *[]string
}

type ctxKey struct{}

func (i *instrumenter) Name() string { return "telemetry" }

func (i *instrumenter) DependencyObserver() framework.DependencyObserver {
	return func(ctx context.Context, dependency, operation string) (context.Context, func(error)) {
		*i.calls = append(*i.calls, dependency+" "+operation)
		return context.WithValue(ctx, ctxKey{}, operation), func(err error) {
			*i.calls = append(*i.calls, "end "+operation)
		}
	}
}

func (i *instrumenter) InjectJob(_ context.Context, md map[string]string) { md["traceparent"] = "x" }

func (i *instrumenter) ExtractJob(ctx context.Context, md map[string]string) context.Context {
	return context.WithValue(ctx, ctxKey{}, md["traceparent"])
}

func (i *instrumenter) ObserveJob(ctx context.Context, kind string, md map[string]string) (context.Context, func(error)) {
	*i.calls = append(*i.calls, "job "+kind)
	return i.ExtractJob(ctx, md), func(error) { *i.calls = append(*i.calls, "end job "+kind) }
}

func newInstrumentedApp(t *testing.T, enabled string, plugins ...framework.Plugin) *framework.App {
	t.Helper()
	app, err := framework.New(framework.Options{
		Plugins:    plugins,
		ConfigText: "[plugins]\nenabled = [" + enabled + "]\n",
		Environ:    []string{},
		LogOutput:  io.Discard,
	})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func TestDependencyObserverOfNoneEnabled(t *testing.T) {
	t.Parallel()
	var calls []string
	// Compiled in but not enabled: no observer, so plugins install no adapter.
	app := newInstrumentedApp(t, `"observability"`, &instrumenter{calls: &calls})
	if f := framework.DependencyObserverOf(app); f != nil {
		t.Fatal("DependencyObserverOf returned an observer with no instrumenting plugin enabled")
	}
	if j := framework.JobPropagatorOf(app); j != nil {
		t.Fatal("JobPropagatorOf returned a propagator with no instrumenting plugin enabled")
	}
}

func TestDependencyObserverOfEnabled(t *testing.T) {
	t.Parallel()
	var calls []string
	app := newInstrumentedApp(t, `"observability", "telemetry"`, &instrumenter{calls: &calls})
	f := framework.DependencyObserverOf(app)
	if f == nil {
		t.Fatal("DependencyObserverOf returned nil with the instrumenting plugin enabled")
	}
	ctx, end := f(context.Background(), "db", "SELECT")
	if ctx.Value(ctxKey{}) != "SELECT" {
		t.Fatal("the observer's context was not returned")
	}
	end(nil)
	if len(calls) != 2 || calls[0] != "db SELECT" || calls[1] != "end SELECT" {
		t.Fatalf("calls = %q", calls)
	}

	j := framework.JobPropagatorOf(app)
	if j == nil {
		t.Fatal("JobPropagatorOf returned nil with the propagating plugin enabled")
	}
	md := map[string]string{}
	j.InjectJob(context.Background(), md)
	if got := j.ExtractJob(context.Background(), md).Value(ctxKey{}); got != "x" {
		t.Fatalf("extracted %v", got)
	}
	jctx, endJob := j.ObserveJob(context.Background(), "mail.send", md)
	if got := jctx.Value(ctxKey{}); got != "x" {
		t.Fatalf("observed job context carries %v", got)
	}
	endJob(nil)
	if n := len(calls); n != 4 || calls[2] != "job mail.send" || calls[3] != "end job mail.send" {
		t.Fatalf("calls = %q", calls)
	}
}
