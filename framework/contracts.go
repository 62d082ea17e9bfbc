package framework

import (
	"context"
	"net/http"
	"net/textproto"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jfastframework/jfast/framework/resilience"
)

// The interfaces through which plugins use each other without importing each
// other, all of them in this file (the telemetry seams HTTPInstrumentable,
// DependencyInstrumenter, JobPropagator and MessagePropagator are in
// instrument.go). A plugin finds another with Get, typed by one of these:
//
//	db, err := framework.Get[framework.DBPool](app, "db")
//
// whose error names the plugin to enable; a plugin declares no interface of
// its own over another plugin, and asserts on no other.

// DBPool is the db plugin as other plugins see it (the queue's postgres
// backend, the idempotency store): its main pool, and Acquire, which takes a
// connection through the db plugin's connection breaker and bounded ping and
// answers the db plugin's dependency error (errors.Is resilience.ErrOpen, with
// the cool-down left) at once while that breaker is open. Pool is nil before
// Start or without [plugin.db] url; a plugin that runs on it says so with
// [Validation.RequirePlugin], which refuses a db plugin without url (a
// [Provider] that lacks its main pool) with the configuration.
type DBPool interface {
	Plugin
	Pool() *pgxpool.Pool
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// Provider is a plugin other plugins run on whose own table can enable it
// without what they run on: the db plugin with only tenant_url_template has
// per-tenant pools and no main pool for the queue's postgres backend or the
// idempotency store. [Validation.RequirePlugin] asks it, once every table is
// bound and its defaults resolved, so a plugin that runs on what it lacks is
// refused with the configuration, by check as by the boot, not at Start.
type Provider interface {
	Plugin
	// Lacks returns what the plugin's table leaves out of what other plugins
	// run on ("the db plugin has no main pool ([plugin.db] has only
	// tenant_url_template, no url)") and the fix in that table ("set
	// [plugin.db] url (or JFAST_DB_URL)"), or two empty strings when nothing
	// is missing. A table its own Validate refuses may say nothing here.
	Lacks() (problem, fix string)
}

// Redis is the cache plugin as other plugins see it (the queue's redis
// backend, the idempotency store, channels): the shared go-redis client (every
// command on it goes through the cache's breaker and command_timeout), that
// breaker (for /ready), and command_timeout (pub/sub reads do not go through
// the command hook, so their users bound their health checks with it). Client
// is nil before Start.
type Redis interface {
	Plugin
	Client() redis.UniversalClient
	Breaker() *resilience.Breaker
	CommandTimeout() time.Duration
}

// Tracing is the telemetry plugin as the client plugins (grpc, llm) see it.
// TracerProvider is nil when the plugin does not export.
type Tracing interface {
	Plugin
	TracerProvider() trace.TracerProvider
	Propagator() propagation.TextMapPropagator
}

// HTTPUpstreams is the http plugin as a reverse proxy (the gateway) sees it:
// ProxiedUpstream returns what the proxy needs of one configured upstream, in
// one lookup; an unknown name is an error naming the configured upstreams.
type HTTPUpstreams interface {
	HTTPTransports
	ProxiedUpstream(name string) (ProxiedUpstream, error)
}

// ProxiedUpstream is one configured upstream as a reverse proxy uses it.
type ProxiedUpstream struct {
	// Transport is the upstream's policies as a RoundTripper (the one
	// HTTPTransports.UpstreamTransport returns).
	Transport http.RoundTripper
	// BaseURL is its base_url, which requests are aimed at.
	BaseURL string
	// Breaker is its breaker (its origin's, with breaker_key = "route"
	// too), for the proxy to report.
	Breaker *resilience.Breaker
	// Bulkhead is its bulkhead (max_concurrent, bulkhead_wait), for a place
	// held beyond a call: a WebSocket tunnel, whose call ends at the
	// upstream's 101.
	Bulkhead *resilience.Bulkhead
	// Timeout is its timeout, the whole call's deadline, which also bounds
	// a request body the proxy reads before the call (to retry it).
	Timeout time.Duration
	// RouteBreaker returns the breaker the calls naming route
	// (OutboundCall.Route) go through: Breaker, unless the upstream keeps
	// one per route (breaker_key = "route").
	RouteBreaker func(route string) *resilience.Breaker
}

// DeadJobCounter is a Jobs plugin that counts the dead jobs of one kind (the
// queue plugin; the mail plugin's check reports its dead deliveries with it).
type DeadJobCounter interface {
	CountDeadJobs(ctx context.Context, kind string) (int, error)
}

// JobMetadataHooks is the queue plugin's seam for the trace context stored
// with each job: inject runs as a job is enqueued, extract as it runs.
type JobMetadataHooks interface {
	AddMetadataHooks(inject func(context.Context, map[string]string), extract func(context.Context, map[string]string) context.Context)
}

// JobObservable is a queue that also tells when a job's attempt ends, so the
// attempt gets a span of its own.
type JobObservable interface {
	AddJobObserver(f JobObserver)
}

// RevocationStore records revoked token IDs (jti). The cache plugin's token store
// implements it; the auth plugin asks it when check_revocation is on. An error
// means the store could not answer: callers that authenticate must fail closed.
type RevocationStore interface {
	Revoke(ctx context.Context, jti string, until time.Time) error
	IsRevoked(ctx context.Context, jti string) (bool, error)
}

// RevocationProvider is a plugin that offers a RevocationStore.
type RevocationProvider interface {
	Plugin
	RevocationStore() RevocationStore
}

type bearerKey struct{}

// ContextWithBearerToken records the caller's verified bearer token (without the
// "Bearer " prefix). The auth plugin's middleware sets it; the http plugin forwards
// it to upstreams with forward_authorization = true, and to no other.
func ContextWithBearerToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, bearerKey{}, token)
}

// BearerToken returns the caller's bearer token recorded in ctx, or "".
func BearerToken(ctx context.Context) string {
	s, _ := ctx.Value(bearerKey{}).(string)
	return s
}

type outboundCallKey struct{}

// ContextWithOutboundRoute names the route template ("/payments/{id}", never a
// path with ids in it) of the outbound HTTP calls made under ctx: an http
// upstream or shared client with breaker_key = "route" keeps one breaker per
// origin and route, so two services behind one gateway origin do not share a
// breaker. A plugin that proxies (a gateway) sets it from its own route; the
// http plugin's http.WithRoute is the same function.
func ContextWithOutboundRoute(ctx context.Context, route string) context.Context {
	return &OutboundCall{Context: ctx, Route: route}
}

// OutboundRoute returns the route template ctx names, or "".
func OutboundRoute(ctx context.Context) string {
	if c := OutboundCallOf(ctx); c != nil {
		return c.Route
	}
	return ""
}

// OutboundCall is a context for one outbound HTTP call that jfast code hands
// to the http plugin's RoundTripper (the gateway does, for each request it
// proxies): it names the call's route, as ContextWithOutboundRoute does, may
// give the request's headers to the RoundTripper, and counts the attempts the
// http plugin makes for it (through its RoundTripper or its clients), so the
// caller learns of retries without a trace hook of its own. Build one with
// its Context and fields set and make the request with it; a proxy embeds it
// in its own per-request state, so the whole call costs one allocation.
type OutboundCall struct {
	context.Context

	// Route is the route template, as ContextWithOutboundRoute's.
	Route string
	// OwnedHeader says the request's Header belongs to this call alone (a
	// reverse proxy's outgoing request, cloned from the inbound one): the
	// RoundTripper adds what travels with every call (the request ID, the
	// time left) to it in place instead of copying it first.
	OwnedHeader bool
	// Interim, when set, sees the header of each interim (1xx) response an
	// attempt gets, before a trace the caller put in the context does (the
	// ReverseProxy's, which passes it on to the client): it may change the
	// header in place. ctx is the attempt's.
	Interim func(ctx context.Context, code int, header textproto.MIMEHeader)
	// InterruptBody, when set, ends a Read of the request's streamed body
	// that waits on the caller, and every Read after it (a reverse proxy
	// moves its client connection's read deadline into the past). The
	// RoundTripper calls it when the call ends (its timeout, the caller's
	// deadline) while the transport waits on the body: that Read would
	// otherwise last until the caller's bytes arrive or its own read
	// deadline passes, and the call with it.
	InterruptBody func()

	attempts atomic.Int32
}

// Value implements context.Context.
func (c *OutboundCall) Value(key any) any {
	if key == (outboundCallKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// CountAttempt records one attempt; the http plugin calls it as each attempt
// starts.
func (c *OutboundCall) CountAttempt() { c.attempts.Add(1) }

// Attempts returns the attempts counted so far.
func (c *OutboundCall) Attempts() int { return int(c.attempts.Load()) }

// OutboundCallOf returns the innermost OutboundCall of ctx, or nil.
func OutboundCallOf(ctx context.Context) *OutboundCall {
	c, _ := ctx.Value(outboundCallKey{}).(*OutboundCall)
	return c
}

type openEndedKey struct{}

// ContextWithOpenEndedResponse marks the outbound HTTP calls made under ctx
// through the http plugin's RoundTripper as calls whose response may last as
// long as it keeps coming (server-sent events, a long download through a
// proxy): the upstream's timeout bounds such a call until its response
// headers arrive; the body is then bounded by the read_timeout gap, the
// caller's context and max_response_bytes. A gateway's stream route sets it;
// the http plugin's http.WithOpenEndedResponse is the same function.
func ContextWithOpenEndedResponse(ctx context.Context) context.Context {
	return context.WithValue(ctx, openEndedKey{}, true)
}

// OpenEndedResponse reports whether ctx was marked by
// ContextWithOpenEndedResponse.
func OpenEndedResponse(ctx context.Context) bool {
	return ctx.Value(openEndedKey{}) != nil
}

// HTTPTransports is the http plugin as other plugins see it (a reverse proxy,
// a plugin driving a provider's SDK): the policies of a configured upstream
// or shared client —
// its deadlines, retries, retry budget, breaker, bulkhead, headers, request ID
// and telemetry — as an http.RoundTripper. Find it with
// framework.Get[framework.HTTPTransports](app, "http") when mounting routes or in
// Start (declare "http" a dependency so it has started). A call's error is one
// of the http plugin's upstream errors: errors.As finds a problem.Renderer (a
// 503 naming the upstream, 502 for a response body over the cap), and
// errors.Is(err, resilience.ErrOpen) tells an open breaker. docs/http.md
// describes the RoundTripper's contract.
type HTTPTransports interface {
	Plugin
	// UpstreamTransport returns the RoundTripper of
	// [plugin.http.upstreams.<name>]. It accepts only requests for the
	// upstream's origin (the scheme, host and port of its base_url). An
	// unknown name is an error naming the configured ones.
	UpstreamTransport(name string) (http.RoundTripper, error)
	// SharedTransport returns the RoundTripper of [plugin.http.shared.<name>]:
	// any origin by absolute URL, each with its own breaker, retry budget
	// and bulkhead, and no connection to the service's own network unless
	// the table allows it. An unknown name is an error naming the configured
	// ones.
	SharedTransport(name string) (http.RoundTripper, error)
}

// Jobs is the queue plugin's contract for other plugins: the mail plugin sends
// every message through it, so an SMTP outage costs job retries, never request
// latency. Payloads are JSON.
type Jobs interface {
	Plugin
	// RegisterJob registers fn as the handler of kind. Call it at boot (from Start
	// or Routes), before the workers start.
	RegisterJob(kind string, fn func(ctx context.Context, payload []byte) error) error
	// EnqueueJob enqueues payload for kind. It is bounded and fails fast with a
	// dependency error (503 naming the queue) when the broker is down.
	EnqueueJob(ctx context.Context, kind string, payload []byte, opts JobOptions) error
}

// JobOptions are the options of one enqueued job. Zero values take the queue's
// configured defaults.
type JobOptions struct {
	Queue       string        // queue name
	MaxAttempts int           // attempts before the dead letter
	Delay       time.Duration // run no earlier than this from now
	UniqueKey   string        // deduplicate while a job with this key is pending
	// Tx, when set, is the database transaction (a pgx.Tx) to insert the job in,
	// so it exists only if the transaction commits (PostgreSQL backend only).
	Tx any
}

// PermanentError marks a job failure that retrying cannot fix (a rejected
// recipient, a malformed payload): the queue sends the job to the dead letter at
// once, with this error as its last error.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a PermanentError.
func Permanent(err error) error { return &PermanentError{Err: err} }
