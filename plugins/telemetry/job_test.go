package telemetry_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// fakeQueue stands for the queue plugin's seam: it stores the metadata of
// each enqueued job and runs the job later, as a worker would, from a
// context unrelated to the request.
type fakeQueue struct {
	mu       sync.Mutex
	inject   []func(context.Context, map[string]string)
	extract  []func(context.Context, map[string]string) context.Context
	observer framework.JobObserver
	jobs     []map[string]string
}

func (q *fakeQueue) Name() string { return "queue" }

func (q *fakeQueue) AddMetadataHooks(inject func(context.Context, map[string]string), extract func(context.Context, map[string]string) context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if inject != nil {
		q.inject = append(q.inject, inject)
	}
	if extract != nil {
		q.extract = append(q.extract, extract)
	}
}

func (q *fakeQueue) enqueue(ctx context.Context) {
	md := map[string]string{}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, f := range q.inject {
		f(ctx, md)
	}
	q.jobs = append(q.jobs, md)
}

// run runs the stored job with handler the way the queue plugin does.
func (q *fakeQueue) run(kind string, handler func(context.Context) error) {
	q.mu.Lock()
	md := q.jobs[0]
	q.mu.Unlock()
	ctx := context.Background()
	for _, f := range q.extract {
		ctx = f(ctx, md)
	}
	end := func(error) {}
	if q.observer != nil {
		ctx, end = q.observer(ctx, kind, md)
	}
	end(handler(ctx))
}

// observableQueue also offers AddJobObserver.
type observableQueue struct{ *fakeQueue }

func (q observableQueue) AddJobObserver(f framework.JobObserver) { q.observer = f }

func startWithQueue(t *testing.T, q framework.Plugin, enqueue func(context.Context)) (*service, *telemetry.Plugin) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\", \"queue\"]\n",
		Plugins: []framework.Plugin{tel, q},
		Routes: func(app *framework.App, r chi.Router) error {
			r.Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) { enqueue(r.Context()) })
			return nil
		},
	})
	return &service{Service: svc, tel: tel, exp: exp}, tel
}

func TestJobSpanIsChildOfEnqueuingRequest(t *testing.T) {
	t.Parallel()
	q := observableQueue{&fakeQueue{}}
	svc, tel := startWithQueue(t, q, q.enqueue)
	svc.Do(t, http.MethodPost, "/orders/5", "")

	observe := tel.DependencyObserver()
	q.run("invoice.send", func(ctx context.Context) error {
		_, end := observe(ctx, "db", "INSERT")
		end(nil)
		return errors.New("smtp refused")
	})
	spans := svc.spans(t)
	req := find(t, spans, "POST /orders/{id}")
	job := find(t, spans, "job invoice.send")
	dep := find(t, spans, "db INSERT")
	if job.SpanContext.TraceID() != req.SpanContext.TraceID() || job.Parent.SpanID() != req.SpanContext.SpanID() {
		t.Errorf("job span: trace %s parent %s, want the request's trace %s and span %s",
			job.SpanContext.TraceID(), job.Parent.SpanID(), req.SpanContext.TraceID(), req.SpanContext.SpanID())
	}
	if job.SpanKind != trace.SpanKindConsumer || job.Status.Code.String() != "Error" {
		t.Errorf("job span kind %v status %v, want consumer and the handler's error", job.SpanKind, job.Status.Code)
	}
	if dep.Parent.SpanID() != job.SpanContext.SpanID() {
		t.Errorf("the job's dependency span is not the job span's child")
	}
	wantAttr(t, job, "jfast.job.kind", "invoice.send")
}

func TestJobWithoutObserverContinuesTheTrace(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	svc, tel := startWithQueue(t, q, q.enqueue)
	svc.Do(t, http.MethodPost, "/orders/6", "")

	observe := tel.DependencyObserver()
	q.run("invoice.send", func(ctx context.Context) error {
		_, end := observe(ctx, "cache", "SET")
		end(nil)
		return nil
	})
	spans := svc.spans(t)
	req := find(t, spans, "POST /orders/{id}")
	dep := find(t, spans, "cache SET")
	if dep.SpanContext.TraceID() != req.SpanContext.TraceID() || dep.Parent.SpanID() != req.SpanContext.SpanID() {
		t.Errorf("the job's work is not in the enqueuing request's trace")
	}
}

func TestDependencySpansOnlyInsideATrace(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	svc, tel := startWithQueue(t, q, q.enqueue)
	observe := tel.DependencyObserver()
	// A pool's ping or a queue's polling: no span in the context, no trace.
	_, end := observe(context.Background(), "db", "SELECT")
	end(nil)
	if n := len(svc.spans(t)); n != 0 {
		t.Errorf("%d spans for an operation outside any trace", n)
	}
	// Nothing is stored with a job enqueued outside a trace.
	q.enqueue(context.Background())
	if md := q.jobs[0]; len(md) != 0 {
		t.Errorf("metadata %v stored outside a trace", md)
	}
}
