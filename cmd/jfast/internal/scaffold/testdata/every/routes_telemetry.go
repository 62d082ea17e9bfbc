package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// telemetryRoutes mounts GET /trace, which answers with the trace this request
// belongs to: the telemetry plugin's middleware opens a server span for every
// request, continuing the caller's trace when it sends a W3C traceparent.
func telemetryRoutes(app *framework.App, r chi.Router) error {
	if _, err := telemetry.From(app); err != nil {
		return err
	}
	r.Method(http.MethodGet, "/trace", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		sc := trace.SpanContextFromContext(r.Context())
		return framework.JSON(w, http.StatusOK, map[string]string{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()})
	}))
	return nil
}
