package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/gateway"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// With the telemetry plugin on both sides, one trace runs from the client
// through the gateway to the service: the gateway's server span continues
// the client's traceparent, its client span for the proxied call is a child
// of it, and the service's server span a child of that.
func TestOneTraceAcrossGatewayAndService(t *testing.T) {
	t.Parallel()
	svcExp, gwExp := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	svcTel, gwTel := telemetry.New(telemetry.WithExporter(svcExp)), telemetry.New(telemetry.WithExporter(gwExp))
	orders := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n[plugins]\nenabled = [\"telemetry\"]\n",
		Plugins: []framework.Plugin{svcTel},
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("order")) })
			return nil
		},
	})
	gw := jfasttest.Start(t, jfasttest.Options{
		TOML: "[app]\nname = \"edge\"\n[plugins]\nenabled = [\"telemetry\", \"http\", \"gateway\"]\n" +
			upstreamTOML("orders", orders.URL) + `
[plugin.gateway.routes.orders]
prefix = "/api/orders"
upstream = "orders"
rewrite_prefix = "/orders"
`,
		Plugins: []framework.Plugin{gwTel, jhttp.New(), gateway.New()},
	})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if r := gw.Get(t, "/api/orders/42", "traceparent", traceparent); r.Status != 200 || r.String() != "order" {
		t.Fatalf("through the gateway: %d %s", r.Status, r.Body)
	}
	spans := func(tel *telemetry.Plugin, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.ForceFlush(ctx); err != nil {
			t.Fatal(err)
		}
		return exp.GetSpans()
	}
	want, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	var server, client *tracetest.SpanStub
	gwSpans := spans(gwTel, gwExp)
	for i, s := range gwSpans {
		switch s.SpanKind {
		case trace.SpanKindServer:
			server = &gwSpans[i]
		case trace.SpanKindClient:
			client = &gwSpans[i]
		}
	}
	if server == nil || client == nil {
		t.Fatalf("gateway spans: %+v", gwSpans)
	}
	if server.SpanContext.TraceID() != want || server.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("gateway server span: trace %s parent %s, want the client's", server.SpanContext.TraceID(), server.Parent.SpanID())
	}
	if client.SpanContext.TraceID() != want || client.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("gateway client span: trace %s parent %s, want a child of the server span %s",
			client.SpanContext.TraceID(), client.Parent.SpanID(), server.SpanContext.SpanID())
	}
	var behind *tracetest.SpanStub
	svcSpans := spans(svcTel, svcExp)
	for i, s := range svcSpans {
		if s.SpanKind == trace.SpanKindServer {
			behind = &svcSpans[i]
		}
	}
	if behind == nil || behind.SpanContext.TraceID() != want || behind.Parent.SpanID() != client.SpanContext.SpanID() {
		t.Fatalf("service server span %+v, want a child of the gateway's client span %s", behind, client.SpanContext.SpanID())
	}
	t.Logf("one trace %s: gateway %q → %q → service %q", want, server.Name, client.Name, behind.Name)
}
