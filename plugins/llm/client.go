package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Client calls one model provider through the official OpenAI Go SDK, with
// jfast's policies around every attempt: the provider's breaker, retry
// budget and bulkhead, its deadlines, and its fallback. Take it once at boot
// ([Provider]) or make one with [NewClient]. A Client is safe for concurrent
// use.
type Client struct {
	cfg      ProviderConfig
	chat     openai.ChatCompletionService
	pool     *http.Transport
	clock    resilience.Clock
	policy   *resilience.Policy
	fallback *Client
	metrics  *metricSet
	dep      *framework.DependencyMetrics // the policy metrics of this provider
	tracer   trace.Tracer
	closed   atomic.Bool
}

// ClientOption configures [NewClient].
type ClientOption func(*clientOptions)

// clientOptions leaves Registry unused: an llm client has no WithMetrics.
type clientOptions struct {
	framework.ClientOptions[*metricSet]
	tracer   trace.TracerProvider
	fallback *Client
}

// WithClock sets the clock of the breaker, the budget, the bulkhead, the
// waits between attempts and the read gap. Defaults to the real clock.
func WithClock(c resilience.Clock) ClientOption { return func(o *clientOptions) { o.Clock = c } }

// WithLogger sets where the breaker's state changes are logged. Defaults to
// slog.Default().
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.Logger = l } }

// WithTracerProvider records a span per call (see docs/llm.md, "Traces").
// Defaults to none.
func WithTracerProvider(tp trace.TracerProvider) ClientOption {
	return func(o *clientOptions) { o.tracer = tp }
}

// WithFallback names the client a call goes to when this one refuses it at
// once (its breaker open, its bulkhead full, or its throttle dropping the
// call). Defaults to none.
func WithFallback(c *Client) ClientOption { return func(o *clientOptions) { o.fallback = c } }

// withShared sets what the plugin's clients share: the App's clock and
// logger and the plugin's metric set.
func withShared(s framework.ClientOptions[*metricSet]) ClientOption {
	return func(o *clientOptions) { o.ClientOptions = s }
}

// NewClient returns a client of one provider, for scripts and tests; a
// service takes its clients from the plugin with [Provider]. Zero fields of
// cfg take their defaults; base_url and model are required. Close the client
// when done.
func NewClient(cfg ProviderConfig, opts ...ClientOption) (*Client, error) {
	return newClient(cfg.withDefaults(), opts...)
}

func newClient(cfg ProviderConfig, opts ...ClientOption) (*Client, error) {
	if err := framework.ClientConfigError("llm: provider '"+cfg.Name+"'", cfg.problems()); err != nil {
		return nil, err
	}
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	// Unlike the other clients', an llm client logs its breaker to
	// slog.Default() unless told otherwise (WithLogger).
	o.Logger = cmp.Or(o.Logger, slog.Default())
	if err := o.Resolve("llm: provider '"+cfg.Name+"'", newMetricSet); err != nil { // no Registry: registers nothing
		return nil, err
	}
	c := &Client{
		cfg:      cfg,
		pool:     newTransport(cfg),
		clock:    o.Clock,
		fallback: o.fallback,
		metrics:  o.Metrics,
		tracer:   noop.NewTracerProvider().Tracer(instrumentationName),
	}
	if o.tracer != nil {
		c.tracer = o.tracer.Tracer(instrumentationName)
	}
	name := cfg.Name
	c.dep = c.metrics.policy.For("llm", name)
	c.policy = resilience.NewPolicy(resilience.PolicyOpts{
		Name: name, Config: cfg.PolicyConfig, Clock: o.Clock,
		OnStateChange:  resilience.LogStateChanges(o.Logger, "llm", cfg.BreakerCoolDown, c.dep.Transition),
		OnAttempt:      c.dep.Attempt,
		OnHedgeRefused: c.dep.HedgeRefused,
	})
	c.dep.Follow(c.policy.Breaker())
	sdkOpts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		// No redirect is followed: the key must not go to another host.
		option.WithHTTPClient(&http.Client{Transport: gapTransport{rt: c.pool}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}),
		option.WithMiddleware(redirectAnswer),
		// One level of retries: this client's, which see every attempt.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		sdkOpts = append(sdkOpts, option.WithAPIKey(cfg.APIKey))
	}
	// NewChatCompletionService, unlike openai.NewClient, reads no OPENAI_*
	// variable: a provider's key and URL come from its table only, so an
	// OPENAI_API_KEY in the environment never goes to another provider.
	c.chat = openai.NewChatCompletionService(sdkOpts...)
	return c, nil
}

// redirectAnswer makes a 3xx the provider answered the SDK's status error,
// as a 4xx is. The http.Client follows no redirect, and the SDK takes every
// status below 400 for success: it would decode the redirect's body as an
// empty answer, or as a stream of no chunks.
func redirectAnswer(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res.StatusCode < 300 || res.StatusCode > 399 {
		return res, err
	}
	_ = res.Body.Close()
	res.Body = http.NoBody
	return nil, &openai.Error{StatusCode: res.StatusCode, Request: req, Response: res}
}

const instrumentationName = "github.com/jfastframework/jfast/plugins/llm"

// Config returns the provider's settings, defaults filled in.
func (c *Client) Config() ProviderConfig { return c.cfg }

// Name returns the provider's name.
func (c *Client) Name() string { return c.cfg.Name }

// Breaker returns the provider's breaker, for tests and health pages.
func (c *Client) Breaker() *resilience.Breaker { return c.policy.Breaker() }

// Bulkhead returns the provider's bulkhead.
func (c *Client) Bulkhead() *resilience.Bulkhead { return c.policy.Bulkhead() }

// Close closes the idle connections; calls made after Close fail with a
// [KindClosed] error. Calls in flight finish.
func (c *Client) Close() error {
	c.closed.Store(true)
	c.pool.CloseIdleConnections()
	return nil
}

// Response is a plain call's answer.
type Response struct {
	// Completion is the provider's answer, as the SDK decoded it.
	Completion *openai.ChatCompletion
	// Provider names the provider that answered: the one called, or its
	// fallback.
	Provider string
	// Model is the model that was asked.
	Model string
	// Attempts is how many requests the answering provider was sent.
	Attempts int
}

// Text returns the first choice's content, or "" when there is none.
func (r *Response) Text() string {
	if r == nil || r.Completion == nil || len(r.Completion.Choices) == 0 {
		return ""
	}
	return r.Completion.Choices[0].Message.Content
}

// Chat sends a chat completion and returns the whole answer. params.Model
// may be empty: the provider's model is used. A failed attempt is retried
// by the rules of docs/llm.md ("What is retried"); a call the provider
// refuses at once (open breaker, full bulkhead, the throttle) goes to its
// fallback. Every error is an [*Error].
func (c *Client) Chat(ctx context.Context, params openai.ChatCompletionNewParams) (*Response, error) {
	k, err := c.begin(ctx, params, false, false)
	if err != nil {
		return nil, err
	}
	return k.resp, nil
}

// ChatStream sends a streamed chat completion and returns once its first
// chunk has arrived, which [Stream.Next] yields first. Until then a failed
// attempt (a 5xx, a failure to connect, a stream silent for read_gap) is
// retried, within the budget and the deadline; once a chunk has reached the
// caller nothing is retried, and a stream cut later (silent for read_gap,
// reset, out of timeout) ends with [Stream.Err] set. Cancelling ctx
// cancels the provider's request. params.StreamOptions.IncludeUsage is set
// unless params sets it, so the last chunk (with no choices) carries the
// token counts. Every error is an [*Error].
func (c *Client) ChatStream(ctx context.Context, params openai.ChatCompletionNewParams) (*Stream, error) {
	k, err := c.begin(ctx, params, true, false)
	if err != nil {
		return nil, err
	}
	return k.stream, nil
}

// call is one call to one provider, from its bulkhead place to its end: the
// attempt and classifier of the policy's loop (resilience.Attempter).
type call struct {
	c        *Client
	run      resilience.Run  // its Context is under timeout
	ctx      context.Context // the caller's, with the call's span
	params   openai.ChatCompletionNewParams
	model    string
	stream   bool
	span     trace.Span
	attempts int
	res      *callResult // the attempt that succeeded
	comp     *openai.ChatCompletion
	fail     *Error // the last failed attempt's error
}

// begin runs a call on c, or on its fallback when c refuses it at once.
func (c *Client) begin(ctx context.Context, params openai.ChatCompletionNewParams, stream, fellBack bool) (*callResult, error) {
	if params.Model == "" || fellBack {
		// A fallback answers with its own model: another provider's name
		// for a model means nothing to it.
		params.Model = c.cfg.Model
	}
	if stream && !params.StreamOptions.IncludeUsage.Valid() {
		params.StreamOptions.IncludeUsage = openai.Bool(true)
	}
	model := params.Model
	parent := ctx
	ctx, span := c.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", model),
		attribute.String("llm.provider", c.cfg.Name),
		attribute.Bool("llm.stream", stream),
	))
	refuse := func(e *Error) (*callResult, error) {
		c.metrics.calls.WithLabelValues(c.cfg.Name, model, e.Kind.String()).Inc()
		c.dep.Calls(e.Kind.String()).Inc()
		if e.Kind == KindBulkheadFull {
			c.dep.Rejected()
		}
		span.SetAttributes(attribute.String("llm.outcome", e.Kind.String()))
		span.SetStatus(codes.Error, e.Kind.String())
		span.End()
		return nil, e
	}
	if c.closed.Load() {
		return refuse(&Error{Provider: c.cfg.Name, Kind: KindClosed, Err: errClosed})
	}
	fallBack := func(cause error) (*callResult, error) {
		e := refused(c.cfg.Name, cause)
		if c.fallback == nil {
			return refuse(e)
		}
		_, _ = refuse(e)
		c.metrics.fallbacks.WithLabelValues(c.cfg.Name, c.fallback.cfg.Name).Inc()
		return c.fallback.begin(parent, params, stream, true)
	}
	k := &call{c: c, ctx: ctx, params: params, model: model, stream: stream, span: span}
	if err := c.policy.Begin(ctx, &k.run, resilience.RunOpts{}); err != nil {
		var oe *resilience.OpenError
		if !errors.As(err, &oe) && !errors.Is(err, resilience.ErrBulkheadFull) && !errors.Is(err, resilience.ErrThrottled) {
			return refuse(c.ctxError(ctx, err, 0)) // the wait for a place was cut
		}
		return fallBack(err)
	}
	return k.do()
}

// callResult is what a successful begin hands back.
type callResult struct {
	resp   *Response
	stream *Stream
}

// do makes the attempts of k through the provider's policy.
func (k *call) do() (*callResult, error) {
	k.run.Attempts(k)
	switch {
	case k.res != nil && k.stream:
		if k.run.Probe() {
			// The half-open breaker's probe answered: it closes now, so
			// the provider's other calls need not wait for this stream to
			// end (up to timeout); its bulkhead place and deadline stay
			// the call's until then (Stream.finish).
			k.run.Settle(resilience.Success)
		}
		return k.res, nil // the stream ends the call when it ends
	case k.res != nil:
		u := k.comp.Usage
		_ = k.end(nil, u.PromptTokens, u.CompletionTokens)
		return k.res, nil
	case k.run.Stopped() == resilience.StopWaitCut:
		return nil, k.end(k.c.ctxError(k.ctx, k.run.Context().Err(), k.attempts), 0, 0)
	}
	return nil, k.end(k.fail, 0, 0)
}

// Attempt makes attempt n under callCtx and classifies it.
func (k *call) Attempt(callCtx context.Context, n int) resilience.Verdict {
	c := k.c
	k.attempts = n
	var f failure
	var o resilience.Outcome
	if k.stream {
		k.res, f, o = k.streamAttempt(callCtx)
	} else {
		k.res, f, o = k.plainAttempt(callCtx)
	}
	if k.res != nil {
		return resilience.Verdict{Outcome: resilience.Success}
	}
	e := f.err
	e.Attempts = n
	k.fail = e
	v := resilience.Verdict{Err: e.Err, Outcome: o, Retry: f.retryable, Overloaded: overloaded(e.StatusCode)}
	if v.Retry && e.Kind == KindRateLimited {
		if d, ok := rateLimitWait(f.header, c.clock.Now()); ok {
			e.RetryAfter = d
			v.Wait, v.Asked, v.Retry = d, true, d <= c.cfg.MaxRetryAfter
		}
	}
	return v
}

// Report hears of each attempt; the policy metrics already counted it
// (PolicyOpts.OnAttempt).
func (k *call) Report(resilience.AttemptRecord) {}

// overloaded reports whether status is the provider refusing for load (429,
// 503, or 529 "overloaded"), which the adaptive throttle counts as not
// accepted.
func overloaded(status int) bool { return status == 429 || status == 503 || status == 529 }

// failure is a failed attempt: the error the call returns if it is not
// retried, whether a retry may help, and the answer's headers (a 429's
// rate-limit headers).
type failure struct {
	err       *Error
	retryable bool
	header    http.Header
}

// plainAttempt makes one attempt of a plain call.
func (k *call) plainAttempt(callCtx context.Context) (*callResult, failure, resilience.Outcome) {
	c := k.c
	comp, err := c.chat.New(callCtx, k.params)
	if err == nil {
		c.metrics.attempts.WithLabelValues(c.cfg.Name, "200").Inc()
		k.comp = comp
		resp := &Response{Completion: comp, Provider: c.cfg.Name, Model: k.model, Attempts: k.attempts}
		return &callResult{resp: resp}, failure{}, resilience.Success
	}
	f, o := k.classify(err, callCtx, 0)
	return nil, f, o
}

// streamAttempt makes one attempt of a streamed call: it succeeds when the
// first chunk arrives (or the stream ends with [DONE] without any).
func (k *call) streamAttempt(callCtx context.Context) (*callResult, failure, resilience.Outcome) {
	c := k.c
	actx, acancel := context.WithCancelCause(callCtx)
	w := startWatch(c.clock, c.cfg.ReadGap, acancel)
	sdk := c.chat.NewStreaming(context.WithValue(actx, watchKey{}, w), k.params)
	first := sdk.Next()
	if first || sdk.Err() == nil && w.done {
		// The first chunk, or a stream that ended ([DONE]) before any: the
		// attempt succeeded, and the stream is the caller's from now on.
		c.metrics.attempts.WithLabelValues(c.cfg.Name, "200").Inc()
		s := &Stream{k: k, sdk: sdk, w: w, actx: actx, acancel: acancel}
		if first {
			s.cur, s.pending = sdk.Current(), true
			c.metrics.firstToken.WithLabelValues(c.cfg.Name, k.model).Observe(c.clock.Now().Sub(k.run.Start()).Seconds())
		}
		return &callResult{stream: s}, failure{}, resilience.Success
	}
	err := sdk.Err()
	if err == nil {
		// The body ended without [DONE] (or was not an event stream): the
		// provider answered nothing, which a 200 does not make an answer.
		err = errNoDone
	}
	_ = sdk.Close()
	w.idle.Stop()
	f, o := k.classify(err, actx, 0)
	acancel(nil)
	return nil, f, o
}

// classify turns an attempt's error into the call's error, the breaker's
// outcome and whether a retry may help. actx is the attempt's context;
// chunks, how many chunks the caller had.
func (k *call) classify(err error, actx context.Context, chunks int) (failure, resilience.Outcome) {
	c := k.c
	e := &Error{Provider: c.cfg.Name, Err: err, Chunks: chunks}
	f := failure{err: e}
	// The provider's own message, which may quote the prompt, is never
	// kept: a status it answered, or an error event in its stream, becomes
	// a cause naming the status.
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		e.StatusCode = apiErr.StatusCode
		e.Err = fmt.Errorf("the provider answered %s", statusText(apiErr.StatusCode))
		if apiErr.Response != nil {
			f.header = apiErr.Response.Header
		}
	} else if ev, ok := eventError(err); ok {
		// An event standing for a refusal or a rate limit is taken as that
		// status would be; any other, as the provider failing (below).
		e.StatusCode, e.Err = ev.Status, ev
	}
	if e.StatusCode != 0 {
		if chunks == 0 { // a stream cut later was counted when its first chunk came
			c.metrics.attempts.WithLabelValues(c.cfg.Name, strconv.Itoa(e.StatusCode)).Inc()
		}
		switch {
		case e.StatusCode == http.StatusTooManyRequests:
			// The provider asks for calm: no evidence it is down.
			e.Kind, f.retryable = KindRateLimited, true
			return f, resilience.Success
		case e.StatusCode >= 500:
			e.Kind, f.retryable = KindStatus, true
			return f, resilience.Failure
		}
		// 400, 401, 403, 404, 422...: the same request fails the same way.
		// So does a 3xx: a redirect is never followed (the key would go
		// with it), so base_url names an address the provider has left.
		e.Kind = KindStatus
		return f, resilience.Success
	}
	var o resilience.Outcome
	switch {
	case errors.Is(context.Cause(actx), errReadGap):
		e.Kind, o = KindTimeout, resilience.Hang
		e.Err = fmt.Errorf("%w (%s)", errReadGap, c.cfg.ReadGap)
		f.retryable = chunks == 0
	case errors.Is(k.ctx.Err(), context.Canceled):
		e.Kind, o = KindCancelled, resilience.Ignore
	case errors.Is(err, egress.ErrAddressNotAllowed):
		// address_guard refused the address the name resolved to: the same
		// answer on every attempt, and no evidence about the provider.
		e.Kind, o = KindUnavailable, resilience.Ignore
	case k.run.Context().Err() != nil || resilience.IsTimeout(err):
		e.Kind, o = KindTimeout, resilience.Hang
		if resilience.CutByCaller(k.ctx, k.run.Own()) {
			o = resilience.Ignore
		}
		// A connect timeout leaves time for another attempt; the call's
		// own deadline does not.
		f.retryable = k.run.Context().Err() == nil && chunks == 0
	default:
		e.Kind, o, f.retryable = KindUnavailable, resilience.Failure, chunks == 0
	}
	if chunks == 0 { // a stream cut later was counted when its first chunk came
		c.metrics.attempts.WithLabelValues(c.cfg.Name, e.Kind.String()).Inc()
	}
	return f, o
}

// ctxError is the error of a call whose wait (for a bulkhead place, between
// attempts) ended with its context.
func (c *Client) ctxError(caller context.Context, err error, attempts int) *Error {
	e := &Error{Provider: c.cfg.Name, Kind: KindTimeout, Attempts: attempts, Err: err}
	if errors.Is(caller.Err(), context.Canceled) {
		e.Kind = KindCancelled
	}
	return e
}

// end ends the call: its bulkhead place, its deadline, its metrics and its
// span. It returns err (nil when e is nil) so callers can return it.
func (k *call) end(e *Error, in, out int64) error {
	c := k.c
	k.run.End(k.run.Outcome()) // a stream ended it already, with its own outcome
	outcome := "ok"
	if e != nil {
		outcome = e.Kind.String()
		if e.Attempts == 0 {
			e.Attempts = k.attempts
		}
	}
	c.metrics.calls.WithLabelValues(c.cfg.Name, k.model, outcome).Inc()
	c.dep.Calls(outcome).Inc()
	c.metrics.duration.WithLabelValues(c.cfg.Name, k.model).Observe(c.clock.Now().Sub(k.run.Start()).Seconds())
	if in > 0 {
		c.metrics.tokens.WithLabelValues(c.cfg.Name, k.model, "in").Add(float64(in))
	}
	if out > 0 {
		c.metrics.tokens.WithLabelValues(c.cfg.Name, k.model, "out").Add(float64(out))
	}
	// Names, counts and outcomes only: a prompt or an answer never goes on
	// a span.
	k.span.SetAttributes(
		attribute.Int("llm.attempts", k.attempts),
		attribute.String("llm.outcome", outcome),
		attribute.Int64("gen_ai.usage.input_tokens", in),
		attribute.Int64("gen_ai.usage.output_tokens", out),
	)
	if e != nil {
		if e.StatusCode != 0 && !e.event() { // an error event came with a 200
			k.span.SetAttributes(attribute.Int("http.response.status_code", e.StatusCode))
		}
		k.span.SetStatus(codes.Error, e.Kind.String())
	}
	k.span.End()
	if e == nil {
		return nil
	}
	return e
}
