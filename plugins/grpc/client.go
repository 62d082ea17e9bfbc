package grpc

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/requestid"
)

// ServiceClient calls one gRPC upstream. It is a grpc.ClientConnInterface, so the
// generated stubs take it as their connection:
//
//	inventory := shoppb.NewInventoryClient(client)
//
// It owns the upstream's breaker, retry budget and bulkhead, which protect
// something only if every call to the upstream goes through the same client:
// take it once at boot ([Client]) or make one with [NewClient], never one
// per request. Its channel comes from a [Pool] and may be shared with other
// clients; nothing a ServiceClient offers can close a shared channel. A ServiceClient is
// safe for concurrent use.
type ServiceClient struct {
	up         Upstream
	conn       *grpc.ClientConn            // nil with instances
	multi      bool                        // instances or discover: a channel and a breaker per instance
	insts      atomic.Pointer[[]*instance] // the instances, in listed (or address) order; nil with a target
	found      *egress.Instances           // discover's resolutions; nil without discover
	pool       *Pool                       // the channels' pool
	dial       []grpc.DialOption           // WithDialOptions'
	next       atomic.Uint64               // round_robin's turn over insts
	ownPool    *Pool                       // the pool NewClient made for this client alone, or nil
	idempotent map[string]bool
	restart    map[string]bool
	retryable  [codes.Unauthenticated + 1]bool
	md         metadata.MD // configured headers
	policy     *resilience.Policy
	breaker    *resilience.Breaker // policy's
	clock      resilience.Clock
	logger     *slog.Logger
	metrics    *upstreamMetrics
	closed     atomic.Bool
	// watch ends the instances' watchers (watchInstance) when the client
	// closes; watchers counts them.
	watch     context.Context
	stopWatch context.CancelFunc
	watchers  sync.WaitGroup
}

// NewClient returns a client for one upstream, for scripts and tests; a
// service takes its clients from the plugin with [Client]. Zero fields of
// u take their defaults; a missing Target or an invalid setting is an error.
// No connection is made until the first call. Close the client when done.
func NewClient(u Upstream, opts ...ClientOption) (*ServiceClient, error) {
	return newClient(u.withDefaults(), opts...)
}

// newClient builds a client from settings with every default filled.
func newClient(u Upstream, opts ...ClientOption) (*ServiceClient, error) {
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := framework.ClientConfigError("grpc: upstream '"+u.Name+"'", u.problems()); err != nil {
		return nil, err
	}
	if err := o.Resolve("grpc: upstream '"+u.Name+"'", newMetricSet); err != nil {
		return nil, err
	}
	clock, logger := o.Clock, o.Logger
	c := &ServiceClient{
		up:         u,
		idempotent: make(map[string]bool, len(u.IdempotentMethods)),
		restart:    make(map[string]bool, len(u.RestartStreams)),
		clock:      clock,
		logger:     logger,
		metrics:    o.Metrics.forUpstream(u.Name),
	}
	for _, m := range u.IdempotentMethods {
		c.idempotent[m] = true
	}
	for _, m := range u.RestartStreams {
		c.restart[m] = true
	}
	for _, n := range u.RetryableCodes {
		c.retryable[codeNames[n]] = true
	}
	if len(u.Headers) > 0 {
		c.md = make(metadata.MD, len(u.Headers))
		for k, v := range u.Headers {
			c.md[k] = []string{v}
		}
	}
	pool := o.pool
	if pool == nil {
		pool = NewPool()
		c.ownPool = pool
	}
	var err error
	c.pool, c.dial = pool, o.dial
	c.watch, c.stopWatch = context.WithCancel(context.Background())
	switch {
	case len(u.Instances) > 0:
		c.multi = true
		err = c.newInstances(u.Instances)
	case u.Discover:
		c.multi = true
		err = c.discover(o.lookup)
	default:
		c.conn, err = pool.channel(u, o.dial, false)
	}
	if err != nil {
		c.endWatch()
		return nil, err
	}
	c.policy = resilience.NewPolicy(resilience.PolicyOpts{
		Name: u.Name, Config: u.PolicyConfig, Clock: clock,
		OnStateChange:  resilience.LogStateChanges(logger.With("upstream", u.Name), "grpc", u.BreakerCoolDown, c.metrics.transition),
		OnAttempt:      c.metrics.dep.Attempt,
		OnHedgeRefused: c.metrics.dep.HedgeRefused,
	})
	c.breaker = c.policy.Breaker()
	c.metrics.dep.Follow(c.breaker)
	return c, nil
}

// Upstream returns the client's settings, defaults filled in.
func (c *ServiceClient) Upstream() Upstream { return c.up }

// Breaker returns the upstream's breaker, for /ready and tests. An upstream
// with instances counts its calls on each instance's breaker instead
// ([ServiceClient.Instances]).
func (c *ServiceClient) Breaker() *resilience.Breaker { return c.breaker }

// State returns the connectivity state of the client's channel (IDLE until
// the first call). With instances it is the best-connected instance's.
func (c *ServiceClient) State() connectivity.State {
	if c.multi {
		return c.instancesState()
	}
	return c.conn.GetState()
}

// Close makes every later call fail with an [Error] of [KindClosed]; calls
// in flight finish. It closes the channel only when the client made its own
// pool (NewClient without [WithPool]): a shared channel is its pool's to
// close.
func (c *ServiceClient) Close() error {
	c.closed.Store(true)
	c.stopDiscovery()
	c.endWatch()
	if c.ownPool != nil {
		return c.ownPool.Close()
	}
	return nil
}

// Invoke makes a unary call: it implements grpc.ClientConnInterface for the
// generated stubs. The call goes through the upstream's policy
// (resilience.Policy): the breaker (once per call), the bulkhead, then up
// to attempts attempts, all within timeout (or the caller's sooner
// deadline). Only a method listed in idempotent_methods is retried, only
// after a code in retryable_codes, only while the retry budget allows and
// the wait and another attempt end before the deadline. Every failure is an
// *[Error].
func (c *ServiceClient) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	mm := c.metrics.method(method)
	if c.closed.Load() {
		return &Error{Upstream: c.up.Name, Method: method, Code: codes.Unavailable, Kind: KindClosed, Err: errClosed}
	}
	u := unary{c: c, mm: mm, method: method, args: args, reply: reply, opts: opts}
	ro := resilience.RunOpts{NoBreaker: c.multi}
	if !c.idempotent[method] {
		ro.Attempts = 1
	}
	_, isProto := reply.(proto.Message)
	ro.Hedge = c.idempotent[method] && isProto // a hedge answers into a reply of its own
	run := &u.run
	if err := c.policy.Begin(ctx, run, ro); err != nil {
		return c.refusedByPolicy(ctx, method, err)
	}
	u.ctx = c.outgoing(run.Context())
	if run.Probe() {
		u.opts = probeOptions(c.conn, opts)
	}
	v := run.Attempts(&u)
	run.End(run.Outcome())
	err := v.Err
	if v.Unsent && u.sentErr != nil {
		// The call's attempts ejected every instance, and its last found
		// none: the call failed as the last attempt sent did.
		err = u.sentErr
	}
	var oe *resilience.OpenError
	if c.multi && errors.As(err, &oe) {
		// Every instance's breaker refused each attempt: nothing was sent.
		c.metrics.refused(method, labelCircuitOpen)
		return circuitOpen(c.up.Name, method, err)
	}
	code := status.Code(err)
	c.metrics.call(mm, method, code)
	mm.duration.Observe(c.clock.Now().Sub(run.Start()).Seconds())
	if err == nil {
		return nil
	}
	return c.failure(method, run.Sent(), err)
}

// unary is one unary call: its attempt and classifier for the policy's
// loop (resilience.Attempter).
type unary struct {
	c           *ServiceClient
	run         resilience.Run
	ctx         context.Context // the call's, with the outgoing metadata
	mm          *methodMetrics
	method      string
	args, reply any
	opts        []grpc.CallOption

	// sentErr is the error of the call's last attempt sent (its
	// branch's, for a branch; the call's is the kept branch's): an attempt
	// that finds no instance leaves the call that failure, not the
	// refusal of the breakers its own attempts opened.
	sentErr error

	// With instances: the attempt in flight's instance and its breaker
	// ticket, and the instances tried.
	inst     *instance
	ticket   resilience.Ticket
	tried    []*instance
	triedBuf [4]*instance

	// Hedging (resilience.Hedger): a branch is one attempt running beside
	// others; parent is the call, whose busy lists the instances of the
	// branches in flight.
	parent *unary
	mu     sync.Mutex
	busy   []*instance
}

// Branch returns one more attempt of the call, answering into a reply of
// its own, to run beside the others (resilience.Hedger). It prefers an
// instance neither tried nor in flight.
func (u *unary) Branch() resilience.Attempter {
	b := &unary{c: u.c, mm: u.mm, method: u.method, args: u.args, opts: u.opts, parent: u,
		reply: u.reply.(proto.Message).ProtoReflect().New().Interface()}
	u.mu.Lock()
	b.tried = append(append(b.triedBuf[:0], u.tried...), u.busy...)
	u.mu.Unlock()
	return b
}

// Keep makes branch a's reply the call's (resilience.Hedger).
func (u *unary) Keep(a resilience.Attempter) {
	b := a.(*unary)
	m := u.reply.(proto.Message)
	proto.Reset(m)
	proto.Merge(m, b.reply.(proto.Message))
	if b.sentErr != nil {
		u.sentErr = b.sentErr // a branch that sent nothing has none
	}
	u.settle(b)
}

// Drop lets go of branch a's attempt (resilience.Hedger): its reply is
// garbage.
func (u *unary) Drop(a resilience.Attempter) { u.settle(a.(*unary)) }

// settle moves a finished branch's instance from busy to tried.
func (u *unary) settle(b *unary) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, in := range b.tried {
		if i := slices.Index(u.busy, in); i >= 0 {
			u.busy = slices.Delete(u.busy, i, i+1)
		}
		if !slices.Contains(u.tried, in) {
			if u.tried == nil {
				u.tried = u.triedBuf[:0]
			}
			u.tried = append(u.tried, in)
		}
	}
}

// Attempt makes attempt n (1-based). A retry gets only what is left until
// the timeout on the client's clock (or the caller's sooner deadline, which
// the call's context carries): gRPC sends that as its grpc-timeout.
func (u *unary) Attempt(callCtx context.Context, n int) resilience.Verdict {
	c := u.c
	conn, opts := c.conn, u.opts
	base, run := u.ctx, &u.run
	if u.parent != nil {
		// A branch runs under its own context, which the loop cancels when
		// another attempt wins.
		base, run = c.outgoing(callCtx), &u.parent.run
	}
	if c.multi {
		if u.tried == nil {
			u.tried = u.triedBuf[:0]
		}
		in, ticket, err := c.pick(u.tried)
		if err != nil {
			// No instance would take it: a retry or a hedge that sent
			// nothing neither wins nor cancels the attempts in flight (the
			// loop's rule), nor counts as a retry or a hedge.
			return resilience.Verdict{Err: err, Outcome: resilience.Ignore, Unsent: true}
		}
		u.inst, u.ticket, conn = in, ticket, in.conn
		if p := u.parent; p != nil {
			p.mu.Lock()
			p.busy = append(p.busy, in)
			p.mu.Unlock()
		}
		if ticket.Probe() {
			opts = probeOptions(conn, opts)
		}
	}
	var err error
	if end, ok := run.Deadline(); n > 1 && ok {
		ctx, cancel := context.WithTimeout(base, end.Sub(c.clock.Now()))
		err = answered(ctx, connectFailed(conn.Invoke(ctx, u.method, u.args, u.reply, opts...)))
		cancel()
	} else {
		err = answered(base, connectFailed(conn.Invoke(base, u.method, u.args, u.reply, opts...)))
	}
	u.sentErr = err
	code := status.Code(err)
	c.metrics.attempt(u.mm, u.method, code)
	v := resilience.Verdict{Err: err, Outcome: outcome(err), Retry: err != nil && c.retryableCode(code),
		Overloaded: code == codes.ResourceExhausted}
	if v.Retry && v.Outcome == resilience.Hang && c.multi {
		v.Elsewhere = c.another(u.inst, u.tried)
	}
	return v
}

// Report gives the attempt's instance (with instances) its outcome; the
// loop counts the attempts sent (resilience.Run.Sent) and the policy
// metrics too (PolicyOpts.OnAttempt), retry or hedge, when it was sent.
// The loop reports every attempt on the call's goroutine.
func (u *unary) Report(rec resilience.AttemptRecord) {
	if in := u.inst; in != nil {
		u.inst = nil
		u.ticket.DoneAttempt(rec.Verdict.Outcome) // a Hang by the silence rule
		in.outstanding.Add(-1)
		u.tried = append(u.tried, in)
	}
}

// probeOptions prepares the breaker's probe call: a channel that failed
// while the breaker was open has been waiting between connection attempts,
// and gRPC fails calls at once until it connects again. The probe wakes it
// and waits for the connection (within the call's deadline), so it tells
// whether the upstream is back rather than that the channel has not yet
// looked.
func probeOptions(conn *grpc.ClientConn, opts []grpc.CallOption) []grpc.CallOption {
	conn.ResetConnectBackoff()
	return append(opts[:len(opts):len(opts)], grpc.WaitForReady(true))
}

// connectFailed turns the DEADLINE_EXCEEDED of a probe (a WaitForReady
// call) whose deadline passed while every connection attempt failed into
// the UNAVAILABLE a call that does not wait gets: the upstream was never
// reached, and its port refusing connections is not a call it left
// unanswered. gRPC's message then goes on with the transport's last error
// ("connection error: desc = ... connection refused"), which it keeps.
func connectFailed(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.DeadlineExceeded {
		return err
	}
	if msg, ok := strings.CutPrefix(st.Message(), waitedForConnection); ok {
		return status.Error(codes.Unavailable, msg)
	}
	return err
}

// waitedForConnection begins gRPC's message for a WaitForReady call whose
// deadline passed while the channel's connection attempts failed
// (pickerWrapper.pick in grpc-go).
const waitedForConnection = "latest balancer error: "

// retryableCode reports whether code is in retryable_codes.
func (c *ServiceClient) retryableCode(code codes.Code) bool {
	return int(code) < len(c.retryable) && c.retryable[code]
}

// refusedByPolicy returns the error of a call or stream the policy did not
// admit (resilience.Policy.Begin): its breaker open, the throttle, the
// bulkhead.
func (c *ServiceClient) refusedByPolicy(ctx context.Context, method string, err error) error {
	var oe *resilience.OpenError
	if errors.As(err, &oe) {
		c.metrics.refused(method, labelCircuitOpen)
		return circuitOpen(c.up.Name, method, err)
	}
	if errors.Is(err, resilience.ErrThrottled) {
		c.metrics.refused(method, labelThrottled)
		return &Error{Upstream: c.up.Name, Method: method, Code: codes.Unavailable, Kind: KindThrottled, RetryAfter: time.Second, Err: err}
	}
	return c.refusedByBulkhead(ctx, method, err)
}

// refusedByBulkhead returns the error of a call that got no place in the
// bulkhead: full, or the call's context ended while it waited.
func (c *ServiceClient) refusedByBulkhead(ctx context.Context, method string, err error) error {
	if errors.Is(err, resilience.ErrBulkheadFull) {
		c.metrics.refused(method, labelBulkheadFull)
		return &Error{Upstream: c.up.Name, Method: method, Code: codes.Unavailable, Kind: KindBulkheadFull, Err: err}
	}
	return c.failure(method, 0, status.FromContextError(err).Err())
}

// failure wraps the error of a call's last attempt. An outage that finds
// the upstream's breaker open (the call's own failure may have opened it)
// carries the cool-down left as RetryAfter: the call that opens the breaker
// tells its caller the same wait as the calls it then refuses.
func (c *ServiceClient) failure(method string, attempts int, err error) *Error {
	e := &Error{Upstream: c.up.Name, Method: method, Code: status.Code(err), Attempts: attempts, Err: err}
	if e.Code == codes.DeadlineExceeded && !errors.As(err, new(deadlineAnswer)) {
		e.Kind = KindTimeout
	}
	switch {
	case !e.Outage():
	case c.multi:
		e.RetryAfter = c.everyInstanceOpen()
	case c.policy.Breaker() != nil:
		if s := c.policy.Breaker().Snapshot(); s.State == resilience.StateOpen {
			e.RetryAfter = s.RetryAfter
		}
	}
	return e
}

// everyInstanceOpen returns the soonest cool-down's end of the instances'
// breakers when every one is open, the wait before a call can be taken
// again, and 0 when any is not (or there is no instance, which no cool-down
// ends).
func (c *ServiceClient) everyInstanceOpen() time.Duration {
	var soonest time.Duration
	for i, in := range c.instances() {
		s := in.breaker.Load().Snapshot()
		if s.State != resilience.StateOpen {
			return 0
		}
		if i == 0 || s.RetryAfter < soonest {
			soonest = s.RetryAfter
		}
	}
	return soonest
}

// outgoing returns ctx with the metadata of docs/grpc.md: the configured
// headers, the request ID, the forwarded bearer token, then the call's own
// outgoing metadata, which wins.
func (c *ServiceClient) outgoing(ctx context.Context) context.Context {
	id := requestid.FromContext(ctx)
	token := ""
	if c.up.ForwardAuthorization {
		token = framework.BearerToken(ctx)
	}
	if len(c.md) == 0 && id == "" && token == "" {
		return ctx
	}
	own, _ := metadata.FromOutgoingContext(ctx)
	md := make(metadata.MD, len(c.md)+len(own)+2)
	for k, v := range c.md {
		md[k] = v
	}
	if id != "" {
		md["x-request-id"] = []string{id}
	}
	if token != "" {
		md["authorization"] = []string{"Bearer " + token}
	}
	for k, v := range own {
		md[k] = v
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// outcome classifies an attempt's error for the breaker. UNAVAILABLE is a
// failure: the upstream is not there. A DEADLINE_EXCEEDED of the client's own
// timeout is a hang (resilience.Hang: the policy's loop applies the silence
// rule, so with nothing answered meanwhile the breaker opens at once for a
// cool-down, docs/resilience.md); one the upstream sent while the call still
// had time ([deadlineAnswer]) is an answer, and a failure among the others:
// the upstream is alive, and what it could not do in time is its own
// dependency's, like the http client's 504. A call its caller cancelled says
// nothing about the upstream, nor does one cut by the caller's sooner
// deadline (resilience.CutByCaller, which the policy's loop and a stream's
// end apply). RESOURCE_EXHAUSTED asks for calm (an open breaker would turn
// it into an outage) and INTERNAL, UNKNOWN and DATA_LOSS prove a server that
// answers, with a bug the same call meets again: no evidence either way,
// like the http client's 429 and 500. Every other code is an answer: the
// upstream is there.
func outcome(err error) resilience.Outcome {
	switch status.Code(err) {
	case codes.OK:
		return resilience.Success
	case codes.Canceled:
		return resilience.Ignore
	case codes.DeadlineExceeded:
		if errors.As(err, new(deadlineAnswer)) {
			return resilience.Failure
		}
		return resilience.Hang // the client's own timeout expired with no answer
	case codes.Unavailable:
		return resilience.Failure
	case codes.ResourceExhausted, codes.Internal, codes.Unknown, codes.DataLoss:
		return resilience.Ignore
	}
	return resilience.Success
}

// deadlineAnswer is a DEADLINE_EXCEEDED status the upstream sent while the
// attempt still had time: its handler's own dependency timed out (a jfast
// server answers a 504 problem so). gRPC gives the same code to a call whose
// own deadline expired; only the attempt's context tells them apart
// ([answered]). Its text and status are the upstream's.
type deadlineAnswer struct{ error }

func (e deadlineAnswer) Unwrap() error              { return e.error }
func (e deadlineAnswer) GRPCStatus() *status.Status { return status.Convert(e.error) }

// answered returns err, the error of a call made under ctx, marked as a
// [deadlineAnswer] when it is a DEADLINE_EXCEEDED that ctx does not explain:
// ctx had not ended, nor reached its deadline, when the call returned. The
// deadline is read from the clock too, as resilience.CutByCaller does: ctx's
// timer may fire a moment after an upstream that timed the call by the
// grpc-timeout it was sent answered, and that answer is the call's own
// deadline.
func answered(ctx context.Context, err error) error {
	if status.Code(err) != codes.DeadlineExceeded || ctx.Err() != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return err
	}
	return deadlineAnswer{err}
}

var _ grpc.ClientConnInterface = (*ServiceClient)(nil)
