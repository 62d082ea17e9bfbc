package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// call is one outbound call of the http plugin: its span, shared by every
// attempt, and the attempts sent so far.
type call struct {
	span     trace.Span
	attempts atomic.Int64
}

type callKey struct{}

// observeCall is the http plugin's framework.CallObserver: one client span
// per call, named "<METHOD> <upstream>". It records the upstream, the caller's
// route template, the status and the number of retries, never the path.
func (p *Plugin) observeCall(ctx context.Context, upstream, method string) (context.Context, func(status, attempts int, err error)) {
	tp := p.tracer.Load()
	if tp == nil {
		return ctx, func(int, int, error) {}
	}
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs,
		attribute.String("http.request.method", method),
		attribute.String("jfast.upstream", upstream),
		attribute.String("peer.service", upstream))
	if rctx := chi.RouteContext(ctx); rctx != nil {
		if route := rctx.RoutePattern(); route != "" {
			attrs = append(attrs, attribute.String("jfast.caller.route", route))
		}
	}
	ctx, span := (*tp).Start(ctx, method+" "+upstream, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	c := &call{span: span}
	ctx = context.WithValue(ctx, callKey{}, c)
	return ctx, func(status, attempts int, err error) {
		retries := max(attempts-1, 0)
		span.SetAttributes(attribute.Int("jfast.http.attempts", attempts), attribute.Int("jfast.http.retries", retries))
		if status > 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", status))
		}
		switch {
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		case status >= 500:
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		span.End()
	}
}

// wrapTransport is the http plugin's framework.TransportWrapper: it puts
// traceparent (and tracestate) on every attempt and records each attempt as
// an event of the call's span.
func (p *Plugin) wrapTransport(_ string, rt http.RoundTripper) http.RoundTripper {
	return &transport{next: rt, prop: p.prop}
}

type transport struct {
	next http.RoundTripper
	prop propagation.TextMapPropagator
}

// RoundTrip implements http.RoundTripper. The request is not modified: the
// headers go on a copy.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	out := *req
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.next.RoundTrip(&out)
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		n := c.attempts.Add(1)
		attrs := []attribute.KeyValue{attribute.Int64("attempt", n)}
		if err != nil {
			attrs = append(attrs, attribute.String("error", err.Error()))
		} else {
			attrs = append(attrs, attribute.Int("http.response.status_code", resp.StatusCode))
		}
		c.span.AddEvent("attempt", trace.WithAttributes(attrs...))
	}
	return resp, err
}
