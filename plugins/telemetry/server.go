package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/requestid"
)

// Middleware implements framework.Middlewarer: a server span for every
// request. It runs inside the framework's middleware, so the request ID is
// known; the span is named by the chi route template, which is only known once
// the router has matched, so the name is set when the request ends. An inbound
// traceparent makes the span a child of the caller's (read by the W3C rules
// for repeated headers: see inbound).
func (p *Plugin) Middleware() func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if !p.exporting() {
			return next
		}
		untraced := make(map[string]bool, len(p.cfg.UntracedPaths))
		for _, path := range p.cfg.UntracedPaths {
			untraced[path] = true
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tp := p.tracer.Load()
			if tp == nil || untraced[r.URL.Path] {
				next.ServeHTTP(w, r)
				return
			}
			ctx := p.prop.Extract(r.Context(), inbound(r.Header))
			method := spanMethod(r.Method)
			ctx, span := (*tp).Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					attribute.String("http.request.method", method),
					attribute.String("request_id", requestid.FromContext(ctx)),
				))
			defer func() {
				v := recover()
				endServerSpan(span, w, r, v != nil)
				if v != nil {
					panic(v)
				}
			}()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// endServerSpan names the span by the route template and records the status.
// A request no route matched, at the top or under a sub-router, has no
// template (framework.RouteTemplate), and its span keeps the method alone.
func endServerSpan(span trace.Span, w http.ResponseWriter, r *http.Request, panicked bool) {
	if route := framework.RouteTemplate(w, r); route != "" {
		span.SetName(spanMethod(r.Method) + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
	}
	status := framework.ResponseStatus(w)
	if panicked {
		status = http.StatusInternalServerError
		span.SetStatus(codes.Error, "panic")
	} else if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	span.End()
}

// spanMethod is the request's method when it is a standard one, else "_OTHER":
// a client can send any token as a method, and a span name must stay among a
// few values.
func spanMethod(m string) string {
	if framework.StandardMethod(m) {
		return m
	}
	return "_OTHER"
}
