package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// collector is an OTLP/HTTP collector on a loopback socket.
type collector struct {
	*httptest.Server
	hits atomic.Int64

	mu       sync.Mutex
	paths    []string
	spans    []string // span names received
	services []string // service.name of each resource
	attrs    map[string]string
}

// newCollector answers every export; with hang it never answers (until the
// exporter gives up and closes the connection).
func newCollector(t *testing.T, hang bool) *collector {
	t.Helper()
	c := &collector{attrs: map[string]string{}}
	release := make(chan struct{})
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		body, err := io.ReadAll(r.Body) // also lets the server notice the client hanging up
		if err != nil {
			return
		}
		if hang {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.Resource.GetAttributes() {
				c.attrs[kv.Key] = kv.Value.GetStringValue()
				if kv.Key == "service.name" {
					c.services = append(c.services, kv.Value.GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, s.Name)
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	t.Cleanup(func() { close(release) }) // runs first
	return c
}

func counter(t *testing.T, app *framework.App, name string) float64 {
	t.Helper()
	mfs, err := app.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.Metric {
				sum += (*dto.Metric)(m).GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func routesX(app *framework.App, r chi.Router) error {
	r.Get("/x/{id}", func(w http.ResponseWriter, r *http.Request) {})
	return nil
}

func TestOTLPExportsToTheCollector(t *testing.T) {
	t.Parallel()
	col := newCollector(t, false)
	tel := telemetry.New()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[app]
name = "orders"
[plugins]
enabled = ["observability", "telemetry"]
[plugin.telemetry]
endpoint = "http://127.0.0.1:1"
[plugin.telemetry.resource_attributes]
deployment.region = "eu-1"
"team" = "orders"
`,
		// The deploy key from the environment wins over the file's address.
		Env:     map[string]string{"JFAST_TELEMETRY_ENDPOINT": col.URL},
		Plugins: []framework.Plugin{tel},
		Routes:  routesX,
	})
	svc.Get(t, "/x/1")
	svc.Get(t, "/x/2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	sort.Strings(col.spans)
	if len(col.spans) != 2 || col.spans[0] != "GET /x/{id}" || col.spans[1] != "GET /x/{id}" {
		t.Fatalf("collector got spans %q", col.spans)
	}
	if len(col.paths) == 0 || col.paths[0] != "/v1/traces" {
		t.Errorf("exported to %q, want /v1/traces", col.paths)
	}
	if len(col.services) == 0 || col.services[0] != "orders" {
		t.Errorf("service.name %q, want the app name", col.services)
	}
	if col.attrs["deployment.region"] != "eu-1" || col.attrs["team"] != "orders" || col.attrs["deployment.environment.name"] != "development" {
		t.Errorf("resource attributes %v", col.attrs)
	}
	if n := counter(t, svc.App, "jfast_telemetry_spans_exported_total"); n != 2 {
		t.Errorf("exported counter %v, want 2", n)
	}
}

// A collector that accepts connections and never answers must not slow
// requests down: finished spans go into a bounded queue without waiting, the
// ones that do not fit are dropped and counted, and the shutdown gives up at
// its deadline.
func TestHangingCollectorAddsNoLatency(t *testing.T) {
	t.Parallel()
	col := newCollector(t, true)
	tel := telemetry.New()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[app]
plugin_stop_timeout = "1s"
[plugins]
enabled = ["observability", "telemetry"]
[plugin.telemetry]
export_timeout = "30s"
batch_timeout = "5ms"
max_queue_size = 8
max_export_batch_size = 4
`,
		Env:     map[string]string{"JFAST_TELEMETRY_ENDPOINT": col.URL},
		Plugins: []framework.Plugin{tel},
		Routes:  routesX,
	})

	const requests = 200
	var slowest time.Duration
	for i := range requests {
		start := time.Now()
		if resp := svc.Get(t, "/x/1"); resp.Status != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.Status)
		}
		slowest = max(slowest, time.Since(start))
	}
	// An export in flight blocks for export_timeout (30 s); a request that
	// waited on it would take that long. A second covers a loaded CI machine.
	if slowest > time.Second {
		t.Errorf("slowest request took %s with a hanging collector", slowest)
	}
	t.Logf("slowest of %d requests with a hanging collector: %s", requests, slowest)
	if col.hits.Load() == 0 {
		t.Fatal("no export reached the collector: the test did not exercise a hanging export")
	}
	if n := counter(t, svc.App, "jfast_telemetry_spans_dropped_total"); n < requests-8-4 {
		t.Errorf("dropped counter %v, want at least %d of %d spans (queue of 8, one batch of 4 in flight)", n, requests-8-4, requests)
	}

	// The flush at shutdown is bounded by app.plugin_stop_timeout, not by the export.
	start := time.Now()
	err := svc.App.Stop(context.Background())
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want the flush to report its deadline", err)
	}
	if took > 3*time.Second {
		t.Errorf("Stop took %s with plugin_stop_timeout = 1s", took)
	}
}

func TestStopFlushesQueuedSpans(t *testing.T) {
	t.Parallel()
	col := newCollector(t, false)
	tel := telemetry.New()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[plugins]
enabled = ["observability", "telemetry"]
[plugin.telemetry]
batch_timeout = "1h"
`,
		Env:     map[string]string{"JFAST_TELEMETRY_ENDPOINT": col.URL},
		Plugins: []framework.Plugin{tel},
		Routes:  routesX,
	})
	for range 3 {
		svc.Get(t, "/x/1")
	}
	if col.hits.Load() != 0 {
		t.Fatal("spans exported before the batch timeout of 1h")
	}
	if err := svc.App.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) != 3 {
		t.Errorf("Stop exported %d spans, want the 3 queued", len(col.spans))
	}
}

// Batches leave on batch_timeout, measured on the App's clock.
func TestBatchTimeoutOnTheAppClock(t *testing.T) {
	t.Parallel()
	clk := jfasttest.NewClock()
	exp := tracetest.NewInMemoryExporter()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"observability\", \"telemetry\"]\n[plugin.telemetry]\nbatch_timeout = \"5s\"\n",
		Plugins: []framework.Plugin{telemetry.New(telemetry.WithExporter(exp))},
		Routes:  routesX,
		Clock:   clk,
	})
	svc.Get(t, "/x/1")
	clk.BlockUntil(1)
	clk.Advance(4 * time.Second)
	if n := len(exp.GetSpans()); n != 0 {
		t.Fatalf("%d spans exported before batch_timeout", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(exp.GetSpans()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no export after advancing the clock past batch_timeout")
		}
		clk.BlockUntil(1)
		clk.Advance(time.Second) // the span may reach the batch just after a tick
		time.Sleep(5 * time.Millisecond)
	}
}
