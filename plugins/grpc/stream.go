package grpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/jfastframework/jfast/framework/resilience"
)

// NewStream opens a stream: it implements grpc.ClientConnInterface for the
// generated stubs. Like a unary call it is admitted by the upstream's policy
// (resilience.Policy.Begin: the throttle, the breaker, the bulkhead, whose
// place the stream holds until it ends) and is bounded by stream_timeout,
// or the caller's sooner deadline. The breaker counts how the stream ended.
//
// A stream is never retried, unless its method is listed in restart_streams
// and it is server-streaming: then a failure with a code in retryable_codes
// opens the stream again when the policy's loop grants a retry
// (resilience.Run.Again: within attempts, the budget and the deadline),
// sends the request again, and goes on delivering from the new stream's
// first message. The caller sees every message the first stream had already
// delivered a second time (1, 2, 1, 2, 3): opt in only for a method whose
// caller can drop duplicates.
//
// Read the stream to its end (io.EOF or an error) or cancel ctx: until then
// the stream holds its place in the bulkhead, at most until stream_timeout.
func (c *ServiceClient) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	mm := c.metrics.method(method)
	if c.closed.Load() {
		return nil, &Error{Upstream: c.up.Name, Method: method, Code: codes.Unavailable, Kind: KindClosed, Err: errClosed}
	}
	s := &clientStream{
		c: c, conn: c.conn, desc: desc, method: method, opts: opts, mm: mm,
		restart: c.restart[method] && desc.ServerStreams && !desc.ClientStreams,
	}
	ro := resilience.RunOpts{NoBreaker: c.multi, Timeout: c.up.StreamTimeout}
	if !s.restart {
		ro.Attempts = 1
	}
	run := &s.run
	if err := c.policy.Begin(ctx, run, ro); err != nil {
		return nil, c.refusedByPolicy(ctx, method, err)
	}
	probe := run.Probe()
	if c.multi {
		// A stream stays on the instance it opened on, restarts included.
		in, ticket, err := c.pick(nil)
		if err != nil {
			if ni := (*noInstanceError)(nil); errors.As(err, &ni) {
				s.unsent = true
				return nil, s.finish(err) // nothing sent: UNAVAILABLE, as a unary call's
			}
			run.End(resilience.Ignore)
			c.metrics.refused(method, labelCircuitOpen)
			return nil, circuitOpen(c.up.Name, method, err)
		}
		s.inst, s.ticket, s.conn, probe = in, ticket, in.conn, ticket.Probe()
	}
	if probe {
		s.opts = probeOptions(s.conn, opts)
	}
	s.callCtx = c.outgoing(run.Context())
	cs, err := s.conn.NewStream(s.callCtx, desc, method, s.opts...)
	if err != nil {
		err = answered(s.callCtx, connectFailed(err))
		c.metrics.attempt(mm, method, status.Code(err))
		return nil, s.finish(err)
	}
	s.cur = cs
	// A stream its caller stops reading without cancelling still gives its
	// place back when stream_timeout ends it.
	s.mu.Lock()
	s.stop = context.AfterFunc(s.callCtx, func() {
		s.finish(status.FromContextError(s.callCtx.Err()).Err())
	})
	s.mu.Unlock()
	return s, nil
}

// clientStream is a stream through the plugin: its Run (the policy's) holds
// the breaker ticket, the bulkhead place and the deadline, judges each
// attempt's end and ends once, when the stream ends; it restarts an
// opted-in server stream.
type clientStream struct {
	c       *ServiceClient
	conn    *grpc.ClientConn
	inst    *instance         // the stream's instance, with instances
	ticket  resilience.Ticket // the instance's breaker's, with instances
	callCtx context.Context   // the Run's, with the outgoing metadata
	desc    *grpc.StreamDesc
	method  string
	opts    []grpc.CallOption
	mm      *methodMetrics
	restart bool
	unsent  bool // no instance to open it on: nothing was sent

	// Used by the caller's goroutine only.
	cur        grpc.ClientStream
	sent       []any // the messages sent, kept to send again on a restart
	closedSend bool

	// delivered is set when the attempt in flight delivered a message:
	// the upstream answered it, so its running into stream_timeout is the
	// stream's own bound, not a hang (read by judge, which a timeout may
	// run on another goroutine).
	delivered atomic.Bool

	// Guarded by mu: finish may run on another goroutine (stream_timeout's).
	mu       sync.Mutex
	run      resilience.Run
	stop     func() bool
	judged   bool  // the attempt in flight was judged, and the loop stopped
	finished bool  // the Run ended
	err      error // the stream's final error, once finished
}

func (s *clientStream) Header() (metadata.MD, error) { return s.cur.Header() }
func (s *clientStream) Trailer() metadata.MD         { return s.cur.Trailer() }
func (s *clientStream) Context() context.Context     { return s.cur.Context() }

func (s *clientStream) CloseSend() error {
	s.closedSend = true
	return s.cur.CloseSend()
}

func (s *clientStream) SendMsg(m any) error {
	if s.restart {
		if pm, ok := m.(proto.Message); ok {
			m = proto.Clone(pm) // the caller may reuse its message
		}
		s.sent = append(s.sent, m)
	}
	return s.cur.SendMsg(m)
}

func (s *clientStream) RecvMsg(m any) error {
	for {
		err := s.cur.RecvMsg(m)
		if err == nil {
			s.delivered.Store(true)
			if !s.desc.ServerStreams {
				// The one response of a client stream: the call is over.
				s.c.metrics.attempt(s.mm, s.method, codes.OK)
				s.finish(nil)
			}
			return nil
		}
		if errors.Is(err, io.EOF) {
			s.c.metrics.attempt(s.mm, s.method, codes.OK)
			s.finish(nil)
			return io.EOF
		}
		err = answered(s.callCtx, err)
		s.c.metrics.attempt(s.mm, s.method, status.Code(err))
		if s.reopen(err) {
			continue
		}
		return s.finish(err)
	}
}

// reopen ends the attempt that failed with err in the policy's loop and,
// when the loop grants a retry (an opted-in stream, a code in
// retryable_codes, then the loop's attempts, deadline, throttle and budget,
// after its backoff wait), opens the stream again and sends the request
// again. It reports whether the new stream is open.
func (s *clientStream) reopen(err error) bool {
	for s.again(err) {
		cs, err2 := s.conn.NewStream(s.callCtx, s.desc, s.method, s.opts...)
		for i := 0; err2 == nil && i < len(s.sent); i++ {
			err2 = cs.SendMsg(s.sent[i])
		}
		if err2 == nil && s.closedSend {
			err2 = cs.CloseSend()
		}
		if err2 == nil || errors.Is(err2, io.EOF) { // io.EOF: the failure waits in RecvMsg
			s.cur = cs
			s.delivered.Store(false) // a new attempt
			return true
		}
		err = answered(s.callCtx, err2)
		s.c.metrics.attempt(s.mm, s.method, status.Code(err))
	}
	return false
}

// again judges the failed attempt in flight (err) unless the stream ended,
// and reports whether the loop makes another.
func (s *clientStream) again(err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.finished && s.judge(err, s.restart)
}

// judge ends the attempt in flight, which ended with err (nil: well), in
// the policy's loop (resilience.Run.Again: the CutByCaller and silence
// rules, the throttle's count, the stop-or-retry rule, the wait of a
// retry), and reports whether another attempt may start. Only an attempt
// that may restart (restart) asks for a retry. s.mu is held: a finish on
// stream_timeout's goroutine waits for the wait, which the same deadline
// cuts.
func (s *clientStream) judge(err error, restart bool) bool {
	code := status.Code(err)
	o := outcome(err)
	if o == resilience.Hang && s.delivered.Load() {
		// The upstream was answering this attempt: a long stream (a watch)
		// that reaches stream_timeout says nothing against it. Only an
		// attempt that delivered nothing before its deadline is a hang.
		o = resilience.Ignore
	}
	v := resilience.Verdict{Err: err, Outcome: o, Retry: restart && err != nil && s.c.retryableCode(code),
		Overloaded: code == codes.ResourceExhausted, Unsent: s.unsent}
	again := s.run.Again(v, nil) // the policy metrics count it (PolicyOpts.OnAttempt)
	s.judged = !again
	return again
}

// finish ends the stream once: its last attempt is judged (when a read did
// not already), the breaker learns the outcome (the instance's too, with
// instances), the bulkhead place is given back (resilience.Run.End), and
// err (nil for a stream that ended well) is wrapped as the stream's *Error,
// which every later call returns.
func (s *clientStream) finish(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return s.err
	}
	s.finished = true
	if s.stop != nil {
		s.stop()
	}
	if !s.judged {
		s.judge(err, false)
	}
	o := s.run.Outcome() // after the CutByCaller rule: the caller's sooner deadline is no evidence
	if s.inst != nil {
		s.ticket.DoneAttempt(o) // a Hang by the silence rule, as the loop's
		s.inst.outstanding.Add(-1)
	}
	s.run.End(o)
	s.c.metrics.call(s.mm, s.method, status.Code(err))
	s.mm.duration.Observe(s.c.clock.Now().Sub(s.run.Start()).Seconds())
	if err != nil {
		s.err = s.c.failure(s.method, s.run.Sent(), err) // not an open that found no instance (Unsent)
	}
	return s.err
}
