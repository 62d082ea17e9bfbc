package framework

import (
	"context"
	"net/http"
)

// The instrumentation seam: how the telemetry plugin reaches into the other
// plugins' clients without any plugin importing another, and without the
// framework importing OpenTelemetry or a client library. Every type here uses
// only the standard library.
//
// Outbound HTTP: the http plugin accepts a TransportWrapper and a CallObserver
// (its AddTransportWrapper and ObserveCalls, see HTTPInstrumentable) before it
// starts; it declares telemetry an optional dependency so the telemetry plugin's
// Start runs first.
//
// Dependencies (PostgreSQL, Redis, S3, ...): a plugin asks DependencyObserverOf
// for the DependencyObserver of the App and, when there is one, installs its
// library's own adapter (a pgx.QueryTracer, a go-redis hook, an SDK middleware)
// that calls it once per operation. The observer is safe to take before the
// telemetry plugin has started: until it has, and when it exports nothing, it
// does nothing.

// TransportWrapper wraps the RoundTripper every attempt of an upstream's calls
// goes through (one RoundTrip per attempt; retries are decided above it). The
// wrapper must not read or close the response body, nor follow redirects.
type TransportWrapper = func(upstream string, rt http.RoundTripper) http.RoundTripper

// CallObserver is told when an outbound call starts (before the breaker) and
// returns the context the call's attempts run under (one carrying the client
// span, so a TransportWrapper sees it and retries share the span) and a
// function called once when the call ends with the status returned (0 when the
// call failed), the number of attempts sent (0 when the call was refused before
// sending) and the call's error. No path is passed: a path can carry an id.
type CallObserver = func(ctx context.Context, upstream, method string) (context.Context, func(status, attempts int, err error))

// HTTPInstrumentable is the http plugin as the telemetry plugin sees it. Both
// methods fail once the http plugin has started.
type HTTPInstrumentable interface {
	Plugin
	AddTransportWrapper(w TransportWrapper) error
	ObserveCalls(f CallObserver) error
}

// DependencyObserver is told when one operation on a dependency starts:
// dependency is the plugin's name ("db", "cache", "storage", "queue"),
// operation a low-cardinality name of what is done ("SELECT", "GET",
// "PutObject"), never an argument, a key or a statement's values. It returns
// the context the operation runs under (carrying its span) and a function to
// call exactly once when the operation ends, with its error (nil on success).
type DependencyObserver = func(ctx context.Context, dependency, operation string) (context.Context, func(err error))

// DependencyInstrumenter is a plugin that observes dependency operations (the
// telemetry plugin).
type DependencyInstrumenter interface {
	Plugin
	// DependencyObserver returns the observer. It may be called before the
	// plugin starts; the observer does nothing until it has, or when it
	// records nothing.
	DependencyObserver() DependencyObserver
}

// JobObserver is told when an attempt of a queued job starts, with the
// metadata stored when it was enqueued. It returns the context the handler
// runs under (continuing the enqueuing request's trace and carrying the job's
// span) and a function to call exactly once when the attempt ends, with the
// handler's error (nil on success).
type JobObserver = func(ctx context.Context, kind string, metadata map[string]string) (context.Context, func(err error))

// JobPropagator is a plugin that carries trace context with queued jobs (the
// telemetry plugin): InjectJob writes the enqueuing context's trace into a
// job's metadata; ExtractJob returns the context a job runs under from that
// metadata; ObserveJob does what ExtractJob does and also makes a span for the
// attempt, for a queue that can tell when the attempt ends.
type JobPropagator interface {
	Plugin
	InjectJob(ctx context.Context, metadata map[string]string)
	ExtractJob(ctx context.Context, metadata map[string]string) context.Context
	ObserveJob(ctx context.Context, kind string, metadata map[string]string) (context.Context, func(err error))
}

// MessagePropagator is a plugin that carries trace context with published
// messages (the telemetry plugin), so that one trace runs from the publishing
// request to every handler of the message: InjectMessage writes the
// publishing context's trace into the message's metadata; ObserveMessage
// returns the context a handler runs under, continuing that trace in a span
// for the delivery, and a function to call exactly once when the handler
// returns, with its error.
type MessagePropagator interface {
	Plugin
	InjectMessage(ctx context.Context, metadata map[string]string)
	ObserveMessage(ctx context.Context, channel string, metadata map[string]string) (context.Context, func(err error))
}

// MessagePropagatorOf returns the first enabled plugin that carries trace
// context with messages, or nil.
func MessagePropagatorOf(app *App) MessagePropagator {
	for _, p := range app.plugins {
		if m, ok := p.(MessagePropagator); ok {
			return m
		}
	}
	return nil
}

// DependencyObserverOf returns the DependencyObserver of the first enabled plugin
// that offers one, or nil when none is enabled: a plugin then installs no
// adapter at all and its calls pay nothing.
func DependencyObserverOf(app *App) DependencyObserver {
	for _, p := range app.plugins {
		if d, ok := p.(DependencyInstrumenter); ok {
			if f := d.DependencyObserver(); f != nil {
				return f
			}
		}
	}
	return nil
}

// JobPropagatorOf returns the first enabled plugin that carries trace context
// with jobs, or nil.
func JobPropagatorOf(app *App) JobPropagator {
	for _, p := range app.plugins {
		if j, ok := p.(JobPropagator); ok {
			return j
		}
	}
	return nil
}
