package grpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/jfastframework/jfast/framework/resilience"
)

// NewStream opens a stream: it implements grpc.ClientConnInterface for the
// generated stubs. Like a unary call it passes the breaker and the bulkhead
// (the stream holds its place until it ends) and is bounded by
// stream_timeout, or the caller's sooner deadline. The breaker counts how the
// stream ended.
//
// A stream is never retried, unless its method is listed in restart_streams
// and it is server-streaming: then a failure with a code in retryable_codes
// opens the stream again (within attempts, the budget and the deadline),
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
	start := c.clock.Now()
	conn, in := c.conn, (*instance)(nil)
	var ticket resilience.Ticket
	var err error
	if c.multi {
		// A stream stays on the instance it opened on, restarts included.
		in, ticket, err = c.pick(nil)
		if in != nil {
			conn = in.conn
		}
	} else {
		ticket, err = c.breaker.Allow()
	}
	if err != nil {
		c.metrics.refused(method, labelCircuitOpen)
		return nil, circuitOpen(c.up.Name, method, err)
	}
	own := time.Now().Add(c.up.StreamTimeout)
	callCtx, cancel := context.WithDeadline(ctx, own)
	permit, err := c.bulkhead.Acquire(callCtx)
	if err != nil {
		cancel()
		ticket.Done(resilience.Ignore)
		if in != nil {
			in.outstanding.Add(-1)
		}
		return nil, c.refusedByBulkhead(ctx, method, err)
	}
	callCtx = c.outgoing(callCtx)
	if ticket.Probe() {
		opts = probeOptions(conn, opts)
	}
	c.budget.RecordCall()
	s := &clientStream{
		c: c, conn: conn, inst: in, ctx: ctx, callCtx: callCtx, cancel: cancel, own: own,
		desc: desc, method: method, opts: opts,
		ticket: ticket, permit: permit, mm: mm, start: start,
		restart: c.restart[method] && desc.ServerStreams && !desc.ClientStreams,
	}
	s.attempts.Store(1)
	cs, err := conn.NewStream(callCtx, desc, method, opts...)
	if err != nil {
		c.metrics.attempt(mm, method, status.Code(err))
		return nil, s.finish(err)
	}
	s.cur = cs
	// A stream its caller stops reading without cancelling still gives its
	// place back when stream_timeout ends it.
	s.stop = context.AfterFunc(callCtx, func() {
		s.finish(status.FromContextError(callCtx.Err()).Err())
	})
	return s, nil
}

// clientStream is a stream through the plugin: it ends the breaker ticket and
// the bulkhead place once, when the stream ends, and restarts an opted-in
// server stream.
type clientStream struct {
	c       *ServiceClient
	conn    *grpc.ClientConn
	inst    *instance       // the stream's instance, with instances
	ctx     context.Context // the caller's
	callCtx context.Context
	cancel  context.CancelFunc
	own     time.Time
	desc    *grpc.StreamDesc
	method  string
	opts    []grpc.CallOption
	ticket  resilience.Ticket
	permit  resilience.Permit
	mm      *methodMetrics
	start   time.Time
	restart bool
	stop    func() bool

	// Used by the caller's goroutine only.
	cur        grpc.ClientStream
	sent       []any // the messages sent, kept to send again on a restart
	closedSend bool
	attempts   atomic.Int32 // read by finish, which a timeout may run on another goroutine

	once sync.Once
	err  error // the stream's final error, once finished
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
		code := status.Code(err)
		s.c.metrics.attempt(s.mm, s.method, code)
		if s.reopen(code) {
			continue
		}
		return s.finish(err)
	}
}

// reopen opens the stream again after a failure with code, when the method
// is opted in and attempts, the budget and the deadline allow, and sends the
// request again. It reports whether the new stream is open.
func (s *clientStream) reopen(code codes.Code) bool {
	for s.restart && int(s.attempts.Load()) < s.c.up.Attempts && s.c.retryableCode(code) && s.callCtx.Err() == nil {
		if !s.c.waitToRetry(s.callCtx, s.start.Add(s.c.up.StreamTimeout), int(s.attempts.Load())) {
			return false
		}
		s.attempts.Add(1)
		cs, err := s.conn.NewStream(s.callCtx, s.desc, s.method, s.opts...)
		for i := 0; err == nil && i < len(s.sent); i++ {
			err = cs.SendMsg(s.sent[i])
		}
		if err == nil && s.closedSend {
			err = cs.CloseSend()
		}
		if err == nil || errors.Is(err, io.EOF) { // io.EOF: the failure waits in RecvMsg
			s.cur = cs
			return true
		}
		code = status.Code(err)
		s.c.metrics.attempt(s.mm, s.method, code)
	}
	return false
}

// finish ends the stream once: the breaker learns its outcome, the bulkhead
// place is given back, and err (nil for a stream that ended well) is wrapped
// as the stream's *Error, which every later call returns.
func (s *clientStream) finish(err error) error {
	s.once.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		code := status.Code(err)
		o := outcome(code)
		if o == resilience.Hang && resilience.CutByCaller(s.ctx, s.own) {
			o = resilience.Ignore // the caller's sooner deadline, not the upstream
		}
		s.ticket.Done(o)
		if s.inst != nil {
			s.inst.outstanding.Add(-1)
		}
		s.permit.Release()
		s.cancel()
		s.c.metrics.call(s.mm, s.method, code)
		s.mm.duration.Observe(s.c.clock.Now().Sub(s.start).Seconds())
		if err != nil {
			s.err = s.c.failure(s.method, int(s.attempts.Load()), err)
		}
	})
	return s.err
}
