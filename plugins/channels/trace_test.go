package channels

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// With the telemetry plugin, one trace runs from the request that published
// to the handler on every replica, on both deliveries: each handler run is a
// consumer span "channel <name>" in the publishing request's trace.
func TestOneTraceFromPublisherToHandlers(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\ndurable = [\"orders\"]")
	cl.enabled = `"telemetry"`
	type node struct {
		rep *replica
		tel *telemetry.Plugin
		exp *tracetest.InMemoryExporter
	}
	var nodes []node
	for range 2 {
		exp := tracetest.NewInMemoryExporter()
		tel := telemetry.New(telemetry.WithExporter(exp))
		cl.extra = []framework.Plugin{tel}
		rep := cl.start(func(ch *Plugin, r chi.Router) error {
			publishRoute(ch, r)
			h := func(ctx context.Context, m Message) error { return nil }
			if err := ch.Subscribe("news", h); err != nil {
				return err
			}
			return ch.Subscribe("orders", h)
		})
		nodes = append(nodes, node{rep, tel, exp})
	}
	for _, n := range nodes {
		subscribed(t, n.rep.ch)
	}
	for _, channel := range []string{"news", "orders"} {
		if r := nodes[0].rep.svc.Do(t, http.MethodPost, "/publish/"+channel, "x"); r.Status != 204 {
			t.Fatalf("publish %s: %d %s", channel, r.Status, r)
		}
	}
	spansOf := func(n node) tracetest.SpanStubs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := n.tel.ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
		return n.exp.GetSpans()
	}
	servers := map[trace.TraceID]bool{}
	for _, s := range spansOf(nodes[0]) {
		if s.SpanKind == trace.SpanKindServer && s.Name == "POST /publish/{channel}" {
			servers[s.SpanContext.TraceID()] = true
		}
	}
	if len(servers) != 2 {
		t.Fatalf("publishing server spans: %d traces, want 2", len(servers))
	}
	// Broadcast: a handler span on both replicas; durable: on one of them.
	handlers := map[string]int{}
	waitFor(t, 10*time.Second, "handler spans", func() bool {
		handlers = map[string]int{}
		for _, n := range nodes {
			for _, s := range spansOf(n) {
				if s.SpanKind == trace.SpanKindConsumer && servers[s.SpanContext.TraceID()] && s.Parent.IsValid() {
					handlers[s.Name]++
				}
			}
		}
		return handlers["channel news"] == 2 && handlers["channel orders"] == 1
	})
}
