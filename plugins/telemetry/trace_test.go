package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// service is a started jfast service with its telemetry plugin and the
// in-memory exporter it exports to.
type service struct {
	*jfasttest.Service
	tel *telemetry.Plugin
	exp *tracetest.InMemoryExporter
}

// spans flushes the service's spans and returns them.
func (s *service) spans(t *testing.T) tracetest.SpanStubs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	return s.exp.GetSpans()
}

// startService starts a service with telemetry (exporting to memory), the http
// plugin and routes; toml is added to the [plugins] table.
func startService(t *testing.T, enabled, toml string, routes func(app *framework.App, r chi.Router) error) *service {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [" + enabled + "]\n" + toml,
		Plugins: []framework.Plugin{tel, jhttp.New()},
		Routes:  routes,
	})
	return &service{Service: svc, tel: tel, exp: exp}
}

// headers records the inbound headers of every request.
type headers struct {
	mu   sync.Mutex
	seen []http.Header
}

func (h *headers) add(x http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, x.Clone())
}

func (h *headers) all() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// startB starts service B: GET /invoices/{id}, answering with the statuses of
// script in turn (200 when it runs out).
func startB(t *testing.T, enabled string, script ...int) (*service, *headers) {
	t.Helper()
	seen := &headers{}
	var n atomic.Int64
	b := startService(t, enabled, "", func(app *framework.App, r chi.Router) error {
		r.Method(http.MethodGet, "/invoices/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			seen.add(r.Header)
			i := int(n.Add(1)) - 1
			status := http.StatusOK
			if i < len(script) {
				status = script[i]
			}
			app.Logger().InfoContext(r.Context(), "serving invoice")
			return framework.JSON(w, status, map[string]string{"invoice": chi.URLParam(r, "id")})
		}))
		return nil
	})
	return b, seen
}

// upstreamTOML configures upstream "billing" at url, with fast retries.
func upstreamTOML(url string) string {
	return fmt.Sprintf(`
[plugin.http.upstreams.billing]
base_url = %q
attempts = 3
backoff_base = "1ms"
backoff_max = "2ms"
retry_budget_min_per_second = 1000
`, url)
}

// startA starts service A: GET /orders/{id} calls billing's /invoices/{id}.
func startA(t *testing.T, enabled, bURL string) *service {
	t.Helper()
	return startService(t, enabled, upstreamTOML(bURL), func(app *framework.App, r chi.Router) error {
		billing, err := jhttp.Client(app, "billing")
		if err != nil {
			return err
		}
		r.Method(http.MethodGet, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			resp, err := billing.Get(r.Context(), "/invoices/"+chi.URLParam(r, "id"))
			if err != nil {
				return err
			}
			return framework.JSON(w, resp.StatusCode, map[string]int{"billing": resp.StatusCode})
		}))
		return nil
	})
}

func find(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	t.Fatalf("no span %q among %q", name, names)
	return tracetest.SpanStub{}
}

func attr(s tracetest.SpanStub, key string) (string, bool) {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

func wantAttr(t *testing.T, s tracetest.SpanStub, key, want string) {
	t.Helper()
	if got, ok := attr(s, key); !ok || got != want {
		t.Errorf("span %q: %s = %q (present %v), want %q", s.Name, key, got, ok, want)
	}
}

// noPath fails when any attribute or event of spans carries a raw path.
func noPath(t *testing.T, spans tracetest.SpanStubs, paths ...string) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name}
		for _, kv := range s.Attributes {
			texts = append(texts, kv.Value.String())
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				texts = append(texts, kv.Value.String())
			}
		}
		for _, text := range texts {
			for _, p := range paths {
				if strings.Contains(text, p) {
					t.Errorf("span %q records the raw path %q in %q", s.Name, p, text)
				}
			}
		}
	}
}

const withTelemetry = `"observability", "telemetry", "http"`

func TestOneTraceAcrossTwoServices(t *testing.T) {
	t.Parallel()
	b, seen := startB(t, withTelemetry)
	a := startA(t, withTelemetry, b.URL)

	resp := a.Get(t, "/orders/4711")
	if resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	aSpans, bSpans := a.spans(t), b.spans(t)

	aServer := find(t, aSpans, "GET /orders/{id}")
	client := find(t, aSpans, "GET billing")
	bServer := find(t, bSpans, "GET /invoices/{id}")

	if aServer.SpanKind != trace.SpanKindServer || client.SpanKind != trace.SpanKindClient || bServer.SpanKind != trace.SpanKindServer {
		t.Errorf("kinds: A server %v, client %v, B server %v", aServer.SpanKind, client.SpanKind, bServer.SpanKind)
	}
	if aServer.Parent.IsValid() {
		t.Errorf("A's server span has a parent %v; the request came without traceparent", aServer.Parent)
	}
	tid := aServer.SpanContext.TraceID()
	if client.SpanContext.TraceID() != tid || bServer.SpanContext.TraceID() != tid {
		t.Fatalf("three traces: A %s, client %s, B %s", tid, client.SpanContext.TraceID(), bServer.SpanContext.TraceID())
	}
	if client.Parent.SpanID() != aServer.SpanContext.SpanID() {
		t.Errorf("client span's parent %s, want A's server span %s", client.Parent.SpanID(), aServer.SpanContext.SpanID())
	}
	if bServer.Parent.SpanID() != client.SpanContext.SpanID() || !bServer.Parent.IsRemote() {
		t.Errorf("B's server span's parent %s (remote %v), want A's client span %s", bServer.Parent.SpanID(), bServer.Parent.IsRemote(), client.SpanContext.SpanID())
	}

	// Route templates, never paths.
	wantAttr(t, aServer, "http.route", "/orders/{id}")
	wantAttr(t, aServer, "http.response.status_code", "200")
	wantAttr(t, bServer, "http.route", "/invoices/{id}")
	wantAttr(t, client, "jfast.upstream", "billing")
	wantAttr(t, client, "jfast.caller.route", "/orders/{id}")
	wantAttr(t, client, "http.response.status_code", "200")
	wantAttr(t, client, "jfast.http.retries", "0")
	noPath(t, append(aSpans, bSpans...), "/orders/4711", "/invoices/4711", "4711")

	// The request ID is on the server spans, and the same on both sides.
	rid := resp.Header.Get("X-Request-ID")
	wantAttr(t, aServer, "request_id", rid)
	wantAttr(t, bServer, "request_id", rid)

	// The header B received carries A's client span.
	got := seen.all()
	if len(got) != 1 {
		t.Fatalf("B got %d requests", len(got))
	}
	want := fmt.Sprintf("00-%s-%s-01", tid, client.SpanContext.SpanID())
	if tp := got[0].Get("Traceparent"); tp != want {
		t.Errorf("traceparent %q, want %q", tp, want)
	}

	// B's log line from the handler carries B's server span.
	if logs := b.Logs(); !strings.Contains(logs, "trace_id="+tid.String()) || !strings.Contains(logs, "span_id="+bServer.SpanContext.SpanID().String()) {
		t.Errorf("B's logs lack trace_id/span_id:\n%s", logs)
	}
}

func TestInboundTraceparentContinues(t *testing.T) {
	t.Parallel()
	b, _ := startB(t, withTelemetry)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if resp := b.Get(t, "/invoices/9", "traceparent", parent); resp.Status != http.StatusOK {
		t.Fatalf("status %d", resp.Status)
	}
	s := find(t, b.spans(t), "GET /invoices/{id}")
	if s.SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || s.Parent.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("span trace %s parent %s: the inbound traceparent was not continued", s.SpanContext.TraceID(), s.Parent.SpanID())
	}
}

func TestTracestateTravels(t *testing.T) {
	t.Parallel()
	b, seen := startB(t, withTelemetry)
	a := startA(t, withTelemetry, b.URL)
	a.Get(t, "/orders/1", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate", "vendor=abc")
	got := seen.all()
	if len(got) != 1 {
		t.Fatalf("B got %d requests", len(got))
	}
	if ts := got[0].Get("Tracestate"); ts != "vendor=abc" {
		t.Errorf("tracestate %q reached B, want the caller's \"vendor=abc\"", ts)
	}
	if tp := got[0].Get("Traceparent"); !strings.HasPrefix(tp, "00-0af7651916cd43dd8448eb211c80319c-") {
		t.Errorf("traceparent %q is not in the caller's trace", tp)
	}
}

func TestUnknownMethodNamedOther(t *testing.T) {
	t.Parallel()
	b, _ := startB(t, withTelemetry)
	b.Do(t, "BREW", "/invoices/1", "")
	s := find(t, b.spans(t), "_OTHER")
	wantAttr(t, s, "http.request.method", "_OTHER")
}

func TestRetriesShareOneSpan(t *testing.T) {
	t.Parallel()
	b, seen := startB(t, withTelemetry, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	a := startA(t, withTelemetry, b.URL)

	if resp := a.Get(t, "/orders/1"); resp.Status != http.StatusOK {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	var clients []tracetest.SpanStub
	for _, s := range a.spans(t) {
		if s.SpanKind == trace.SpanKindClient {
			clients = append(clients, s)
		}
	}
	if len(clients) != 1 {
		t.Fatalf("%d client spans for one call with retries, want 1", len(clients))
	}
	c := clients[0]
	wantAttr(t, c, "jfast.http.attempts", "3")
	wantAttr(t, c, "jfast.http.retries", "2")
	wantAttr(t, c, "http.response.status_code", "200")
	if len(c.Events) != 3 {
		t.Fatalf("%d attempt events, want 3", len(c.Events))
	}
	for i, e := range c.Events {
		wantStatus := []string{"503", "503", "200"}[i]
		if e.Name != "attempt" {
			t.Errorf("event %d named %q", i, e.Name)
		}
		for _, kv := range e.Attributes {
			if kv.Key == "http.response.status_code" && kv.Value.String() != wantStatus {
				t.Errorf("attempt %d status %s, want %s", i+1, kv.Value.String(), wantStatus)
			}
		}
	}
	// Every attempt carried the same span, so B's three server spans are its
	// children.
	got := seen.all()
	if len(got) != 3 {
		t.Fatalf("B got %d requests, want 3", len(got))
	}
	for i, h := range got {
		if tp := h.Get("Traceparent"); !strings.Contains(tp, c.SpanContext.SpanID().String()) {
			t.Errorf("attempt %d traceparent %q does not carry the call's span %s", i+1, tp, c.SpanContext.SpanID())
		}
	}
}

func TestTelemetryOffSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	b, seen := startB(t, `"observability", "http"`)
	for _, tc := range []struct {
		name, enabled, toml string
	}{
		{"not enabled", `"observability", "http"`, ""},
		{"exporter none", withTelemetry, "[plugin.telemetry]\nexporter = \"none\"\n"},
	} {
		a := startService(t, tc.enabled, tc.toml+upstreamTOML(b.URL), func(app *framework.App, r chi.Router) error {
			billing, err := jhttp.Client(app, "billing")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				if _, err := billing.Get(r.Context(), "/invoices/1"); err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, nil)
			}))
			return nil
		})
		before := len(seen.all())
		// Even an inbound traceparent is not passed on: nothing is propagated.
		if resp := a.Get(t, "/orders/1", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"); resp.Status != http.StatusOK {
			t.Fatalf("%s: status %d", tc.name, resp.Status)
		}
		h := seen.all()[before]
		for _, k := range []string{"Traceparent", "Tracestate"} {
			if v, ok := h[k]; ok {
				t.Errorf("%s: %s %q sent", tc.name, k, v)
			}
		}
		if n := len(a.spans(t)); n != 0 {
			t.Errorf("%s: %d spans recorded", tc.name, n)
		}
		if strings.Contains(a.Logs(), "trace_id") {
			t.Errorf("%s: logs carry trace_id", tc.name)
		}
	}
}

func TestSampleRatioZeroIsParentBased(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\"]\n[plugin.telemetry]\nsample_ratio = 0\n",
		Plugins: []framework.Plugin{tel},
		Routes: func(app *framework.App, r chi.Router) error {
			r.Get("/x/{id}", func(w http.ResponseWriter, r *http.Request) {})
			return nil
		},
	})
	svc.Get(t, "/x/1") // a new trace: not sampled at ratio 0
	svc.Get(t, "/x/2", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	svc.Get(t, "/x/3", "traceparent", "00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("recorded %d spans, want only the one whose caller sampled it", len(spans))
	}
}

func TestServerSpanStatusAndUnmatched(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\"]\n",
		Plugins: []framework.Plugin{tel},
		Routes: func(app *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/fail/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				return fmt.Errorf("boom")
			}))
			r.Get("/panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
			return nil
		},
	})
	svc.Get(t, "/fail/7")
	svc.Get(t, "/panic")
	svc.Get(t, "/no/such/path/12")
	svc.Get(t, "/live")
	svc.Get(t, "/ready")
	svc.Get(t, "/metrics")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	fail := find(t, spans, "GET /fail/{id}")
	wantAttr(t, fail, "http.response.status_code", "500")
	if fail.Status.Code.String() != "Error" {
		t.Errorf("a 500 has span status %v", fail.Status.Code)
	}
	p := find(t, spans, "GET /panic")
	wantAttr(t, p, "http.response.status_code", "500")
	// An unmatched request is named by its method alone: the path is not a name.
	nf := find(t, spans, "GET")
	wantAttr(t, nf, "http.response.status_code", "404")
	noPath(t, spans, "/no/such/path/12", "/fail/7")
	// The probes and the scrape make no span (untraced_paths).
	if len(spans) != 3 {
		t.Errorf("%d spans, want 3: /live, /ready and /metrics are untraced", len(spans))
	}
}

// TestUnmatchedUnderASubRouterSpanIsNamedByItsMethod: a request no route
// matches under a sub-router (r.Route("/api", ...)), a 404 or a 405, has its
// span named by its method alone with no http.route, as at the top, not
// by the mount's "/api/*"; a catch-all route of its own keeps its template.
func TestUnmatchedUnderASubRouterSpanIsNamedByItsMethod(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\"]\n",
		Plugins: []framework.Plugin{tel},
		Routes: func(app *framework.App, r chi.Router) error {
			r.Route("/api", func(r chi.Router) {
				r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
			})
			r.Get("/files/*", func(w http.ResponseWriter, r *http.Request) {})
			return nil
		},
	})
	if r := svc.Get(t, "/api/no/such/12"); r.Status != http.StatusNotFound {
		t.Fatalf("/api/no/such/12 = %d", r.Status)
	}
	if r := svc.Do(t, http.MethodDelete, "/api/orders/1", ""); r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE /api/orders/1 = %d", r.Status)
	}
	svc.Get(t, "/files/a.txt")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	for _, name := range []string{"GET", "DELETE"} {
		s := find(t, spans, name)
		if route, ok := attr(s, "http.route"); ok {
			t.Errorf("the unmatched %s request has http.route %q", name, route)
		}
	}
	wantAttr(t, find(t, spans, "GET /files/*"), "http.route", "/files/*")
	if len(spans) != 3 {
		t.Errorf("%d spans, want 3", len(spans))
	}
}

// The in-memory exporter is an sdktrace.SpanExporter.
var _ sdktrace.SpanExporter = (*tracetest.InMemoryExporter)(nil)
