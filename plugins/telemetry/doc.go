// Package telemetry is the jfast plugin for OpenTelemetry traces with W3C
// propagation: one trace across services, jobs and dependencies.
//
//	[plugins]
//	enabled = ["observability", "telemetry", "http"]
//
//	[plugin.telemetry]
//	exporter = "otlp"                 # OTLP over HTTP/protobuf; "stdout"; "none"
//	endpoint = "http://collector:4318" # deploy key: JFAST_TELEMETRY_ENDPOINT
//	sample_ratio = 0.1                 # parent-based
//
// What it records:
//
//   - a server span for every request, named by the chi route template
//     ("GET /orders/{id}", never the raw path), with the status and the
//     request ID; an inbound traceparent continues the caller's trace;
//   - a client span for every call of the http plugin ("GET billing"), with
//     the upstream, the status, the number of retries and one event per
//     attempt; traceparent and tracestate go on every attempt, so the
//     upstream's server span is a child of the call's span. The path of the
//     call is not recorded (it can carry an id); the caller's route template is;
//   - a span for every operation of a plugin that uses the framework's
//     DependencyObserver seam (see framework/instrument.go), when the operation
//     runs inside a traced request or job;
//   - the trace context of the enqueuing request with every queued job, so the
//     job's work continues that trace.
//
// Logs written with a context carry trace_id and span_id. Spans are exported
// in batches from a bounded queue: an unreachable or hanging collector never
// slows a request down; spans that do not fit are dropped and counted in
// jfast_telemetry_spans_dropped_total. Stop flushes within the shutdown
// deadline.
//
// With the plugin not enabled, or exporter = "none", nothing is recorded and
// nothing is added to outbound calls or jobs.
//
// docs/telemetry.md lists every key, the span names and attributes, and what
// is tested.
package telemetry
