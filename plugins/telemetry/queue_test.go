package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// The real queue plugin (redis backend, on the real cache plugin and the
// machine's Redis): the job's span is the child of the request that enqueued
// it, and the job's Redis command is the job span's child.
func TestQueuedJobSpanWithTheQueuePlugin(t *testing.T) {
	t.Parallel()
	qname := fmt.Sprintf("tele_%d_%d", os.Getpid(), time.Now().UnixNano())
	prefix := "jfasttest:telemetry:" + qname + ":"
	t.Cleanup(func() { deleteRedisKeys(t, qname, "asynq:{"+qname+"}:*", prefix+"*") })

	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	q := queue.New()
	c := cache.New()
	ran := make(chan string, 1)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf(`
[plugins]
enabled = ["observability", "telemetry", "cache", "queue"]
[plugin.cache]
url = "redis://127.0.0.1:6379/0"
key_prefix = %q
[plugin.queue]
backend = "redis"
poll_interval = "100ms"
[plugin.queue.queues.%s]
concurrency = 1
`, prefix, qname),
		Plugins: []framework.Plugin{tel, c, q},
		Routes: func(app *framework.App, r chi.Router) error {
			if err := queue.Handle(q, "invoice.send", func(ctx context.Context, id string) error {
				err := c.Client().Set(ctx, prefix+"sent", id, time.Minute).Err()
				ran <- id
				if err != nil {
					return queue.Permanent(err)
				}
				return errors.New("smtp refused") // the span records the attempt's error
			}); err != nil {
				return err
			}
			r.Method(http.MethodPost, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				_, err := q.Enqueue(r.Context(), "invoice.send", chi.URLParam(r, "id"), queue.Queue(qname), queue.MaxAttempts(1))
				return err
			}))
			return nil
		},
	})
	if resp := svc.Do(t, http.MethodPost, "/orders/77", ""); resp.Status != http.StatusOK {
		t.Fatalf("enqueue: status %d: %s", resp.Status, resp.Body)
	}
	select {
	case <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not run within 20s")
	}
	s := &service{Service: svc, tel: tel, exp: exp}
	var job tracetest.SpanStub
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := s.spans(t)
		for _, sp := range spans {
			if sp.Name == "job invoice.send" {
				job = sp
			}
		}
		if job.Name != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the attempt's span ends just after the handler returns
	}
	spans := s.spans(t)
	req := find(t, spans, "POST /orders/{id}")
	job = find(t, spans, "job invoice.send")
	if job.SpanContext.TraceID() != req.SpanContext.TraceID() || job.Parent.SpanID() != req.SpanContext.SpanID() {
		t.Errorf("job span trace %s parent %s, want the request's trace %s and span %s",
			job.SpanContext.TraceID(), job.Parent.SpanID(), req.SpanContext.TraceID(), req.SpanContext.SpanID())
	}
	if job.Status.Code.String() != "Error" {
		t.Errorf("job span status %v, want the handler's error", job.Status.Code)
	}
	var set *tracetest.SpanStub
	for i := range spans {
		if spans[i].Name == "cache SET" {
			set = &spans[i]
		}
	}
	if set == nil || set.Parent.SpanID() != job.SpanContext.SpanID() {
		t.Errorf("the job's Redis SET is not the job span's child (%v)", set)
	}
}

// deleteRedisKeys removes the test's queue and keys from the shared Redis
// (never anything else).
func deleteRedisKeys(t *testing.T, qname string, patterns ...string) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.SRem(ctx, "asynq:queues", qname)
	for _, p := range patterns {
		iter := c.Scan(ctx, 0, p, 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("clean up %s: %v", p, err)
		}
	}
}
