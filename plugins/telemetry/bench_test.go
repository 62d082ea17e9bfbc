package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// BenchmarkServerSpan is the cost a server span adds to a request served
// through the App's router (no socket): "off" is the plugin not enabled,
// "on" records a span per request and exports it to an exporter that
// discards it.
func BenchmarkServerSpan(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			enabled := `"observability"`
			if mode == "on" {
				enabled = `"observability", "telemetry"`
			}
			svc := jfasttest.Start(b, jfasttest.Options{
				TOML:    "[app]\nlog_level = \"error\"\n[plugins]\nenabled = [" + enabled + "]\n",
				Plugins: []framework.Plugin{telemetry.New(telemetry.WithExporter(tracetest.NewNoopExporter()))},
				Routes: func(app *framework.App, r chi.Router) error {
					r.Get("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {})
					return nil
				},
			})
			h := svc.App.Router()
			req := httptest.NewRequest(http.MethodGet, "/orders/42", nil)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
			}
		})
	}
}
