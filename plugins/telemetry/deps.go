package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework"
)

// DependencyObserver implements framework.DependencyInstrumenter. It returns
// nil with exporter = "none", so the other plugins install no adapter. The
// observer may be taken before this plugin starts; until then it does nothing.
func (p *Plugin) DependencyObserver() framework.DependencyObserver {
	if !p.exporting() {
		return nil
	}
	return p.observeDependency
}

func endNothing(error) {}

// observeDependency starts a client span "<dependency> <operation>" — only
// inside a traced request or job: an operation with no span in its context
// (a pool's health ping, a queue's polling) would otherwise make a trace of
// its own, many per second.
func (p *Plugin) observeDependency(ctx context.Context, dependency, operation string) (context.Context, func(error)) {
	tp := p.tracer.Load()
	if tp == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, endNothing
	}
	ctx, span := (*tp).Start(ctx, dependency+" "+operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("jfast.dependency", dependency), attribute.String("jfast.operation", operation)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// InjectJob implements framework.JobPropagator: the enqueuing context's trace
// goes into the job's metadata (traceparent, tracestate). Nothing is written
// with exporter = "none" or outside a trace.
func (p *Plugin) InjectJob(ctx context.Context, metadata map[string]string) {
	if p.tracer.Load() == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	p.prop.Inject(ctx, propagation.MapCarrier(metadata))
}

// ExtractJob implements framework.JobPropagator: the job runs under the trace
// of the request that enqueued it, so its spans (calls, dependencies, the
// job's own spans) belong to that trace.
func (p *Plugin) ExtractJob(ctx context.Context, metadata map[string]string) context.Context {
	if p.tracer.Load() == nil || len(metadata) == 0 {
		return ctx
	}
	return p.prop.Extract(ctx, propagation.MapCarrier(metadata))
}

// ObserveJob implements framework.JobPropagator: the attempt runs under the
// enqueuing request's trace, in a consumer span "job <kind>" that ends when
// the returned function is called. A job enqueued outside a trace starts a
// trace of its own (subject to sample_ratio).
func (p *Plugin) ObserveJob(ctx context.Context, kind string, metadata map[string]string) (context.Context, func(error)) {
	return p.observeConsumer(ctx, metadata, "job", kind, "jfast.job.kind")
}

// InjectMessage implements framework.MessagePropagator: the publishing
// context's trace goes into the message's metadata, as for a job.
func (p *Plugin) InjectMessage(ctx context.Context, metadata map[string]string) {
	p.InjectJob(ctx, metadata)
}

// ObserveMessage implements framework.MessagePropagator: a handler runs under
// the publishing request's trace, in a consumer span "channel <name>" that
// ends when the returned function is called. A message published outside a
// trace starts a trace of its own (subject to sample_ratio).
func (p *Plugin) ObserveMessage(ctx context.Context, channel string, metadata map[string]string) (context.Context, func(error)) {
	return p.observeConsumer(ctx, metadata, "channel", channel, "jfast.channel")
}

// observeConsumer starts the consumer span "<what> <name>", with name in
// the attribute key, under the trace metadata carries (a trace of its own
// without one), and returns the function that ends it, recording the
// handler's error. With tracing off it costs nothing.
func (p *Plugin) observeConsumer(ctx context.Context, metadata map[string]string, what, name, key string) (context.Context, func(error)) {
	tp := p.tracer.Load()
	if tp == nil {
		return ctx, endNothing
	}
	if len(metadata) > 0 {
		ctx = p.prop.Extract(ctx, propagation.MapCarrier(metadata))
	}
	ctx, span := (*tp).Start(ctx, what+" "+name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String(key, name)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// The tracing seams of framework/instrument.go, implemented in this file.
var (
	_ framework.DependencyInstrumenter = (*Plugin)(nil)
	_ framework.JobPropagator          = (*Plugin)(nil)
	_ framework.MessagePropagator      = (*Plugin)(nil)
)
