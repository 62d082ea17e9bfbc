package grpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

// server is the plugin's gRPC server: every RPC gets what every HTTP request
// of a jfast service gets (request ID, deadline, panic recovery, access log,
// metrics, tracing, errors rendered in one place), and grpc.health.v1.Health
// answers from /ready's checks.
type server struct {
	cfg     ServerConfig
	srv     *grpc.Server
	log     *slog.Logger
	timeout time.Duration // app.request_timeout
	metrics *serverMetrics
	health  *healthServer

	serving  atomic.Bool
	mu       sync.Mutex
	ln       net.Listener
	served   chan struct{}
	stopOnce sync.Once
}

func newServer(app *framework.App, cfg ServerConfig, otel []otelgrpc.Option) (*server, error) {
	s := &server{
		cfg:     cfg,
		log:     app.Logger(),
		timeout: app.Config().RequestTimeout,
		metrics: newServerMetrics(),
	}
	if err := s.metrics.register(app.Metrics()); err != nil {
		return nil, fmt.Errorf("grpc: registering server metrics: %w", err)
	}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.unary, shedder{app.Overload()}.unary),
		grpc.ChainStreamInterceptor(s.stream),
	}
	if otel != nil {
		opts = append(opts, grpc.StatsHandler(otelgrpc.NewServerHandler(otel...)))
	}
	s.srv = grpc.NewServer(opts...)
	s.health = &healthServer{app: app, srv: s.srv, stopping: make(chan struct{}), interval: healthWatchInterval}
	healthpb.RegisterHealthServer(s.srv, s.health)
	if cfg.Reflection {
		reflection.Register(s.srv)
	}
	return s, nil
}

// registrar is what services are registered on: the server, until it
// serves.
func (s *server) registrar() grpc.ServiceRegistrar { return registrar{s} }

type registrar struct{ s *server }

// RegisterService registers a service. Registering once the server serves
// is a programmer error (gRPC would end the process): it panics naming the
// fix.
func (r registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if r.s.serving.Load() {
		panic("grpc: RegisterService after the gRPC server started serving; register services from Options.Routes")
	}
	r.s.srv.RegisterService(desc, impl)
}

// serve listens on listen and serves in the background.
func (s *server) serve(app *framework.App) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("grpc: %w", framework.ListenError("plugin.grpc.server.listen", "JFAST_GRPC_SERVER__LISTEN", s.cfg.Listen, err))
	}
	s.serving.Store(true)
	s.mu.Lock()
	s.ln, s.served = ln, make(chan struct{})
	s.mu.Unlock()
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("grpc: serving stopped", slog.String("error", err.Error()))
		}
	}()
	names := make([]string, 0)
	for n := range s.srv.GetServiceInfo() {
		names = append(names, n)
	}
	s.log.Info("grpc: listening", slog.String("addr", ln.Addr().String()), slog.Any("services", names))
	return nil
}

// addr returns the address the server listens on, or its configured listen
// before it serves.
func (s *server) addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Listen
}

// shutdown ends Health.Watch streams, then stops gracefully within ctx, then
// hard.
func (s *server) shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.health.stopping) })
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.srv.Stop()
		<-done
		err = fmt.Errorf("grpc: calls still in flight when the shutdown timeout ended were cut: %w", ctx.Err())
	}
	if served != nil {
		<-served
	}
	return err
}

// stop stops a server at once (idempotent; a no-op after shutdown).
func (s *server) stop() {
	s.stopOnce.Do(func() { close(s.health.stopping) })
	s.srv.Stop()
	s.mu.Lock()
	served := s.served
	s.mu.Unlock()
	if served != nil {
		<-served
	}
}

// rpc is one RPC being served.
type rpc struct {
	method string
	id     string
	start  time.Time
	cancel context.CancelFunc
	// callerDeadline is the caller's grpc-timeout as a time (zero without
	// one).
	callerDeadline time.Time
	// state says whether a unary handler returned before its call was
	// answered (handlerRunning, handlerReturned, handlerAbandoned).
	state atomic.Int32
}

// begin gives the RPC its request ID (the caller's x-request-id when sane,
// else a new one, echoed in the response header) and its deadline (the
// sooner of the caller's grpc-timeout and app.request_timeout).
func (s *server) begin(ctx context.Context, method string, setHeader func(metadata.MD) error) (context.Context, *rpc) {
	r := &rpc{method: method, start: time.Now()}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("x-request-id"); len(v) > 0 && requestid.Valid(v[0]) {
			r.id = v[0]
		}
	}
	if r.id == "" {
		r.id = requestid.New()
	}
	ctx = requestid.NewContext(ctx, r.id)
	_ = setHeader(metadata.Pairs("x-request-id", r.id))
	r.callerDeadline, _ = ctx.Deadline()
	ctx, r.cancel = context.WithTimeout(ctx, s.timeout)
	return ctx, r
}

// cutByDeadline reports whether the call's own context ended at its
// deadline: app.request_timeout, or the caller's grpc-timeout. On the wire a
// grpc-timeout ends as the caller's RST_STREAM, the same frame as a cancel,
// and it usually arrives just before this server's own timer (the caller
// started counting before the call got here). So a cancel that comes when
// less than a quarter of the caller's timeout, or less than
// deadlineMargin, was left is the deadline too.
func (r *rpc) cutByDeadline(ctx context.Context) bool {
	switch ctx.Err() {
	case context.DeadlineExceeded:
		return true
	case context.Canceled:
		if r.callerDeadline.IsZero() {
			return false
		}
		margin := max(r.callerDeadline.Sub(r.start)/4, deadlineMargin)
		return time.Until(r.callerDeadline) < margin
	}
	return false
}

// deadlineMargin is the least time before the caller's deadline within
// which its cancel counts as the deadline (see rpc.cutByDeadline).
const deadlineMargin = 100 * time.Millisecond

// end turns the handler's error into the RPC's status, logs the RPC and
// counts it.
func (s *server) end(ctx context.Context, r *rpc, err error, setTrailer func(metadata.MD)) error {
	cut := r.cutByDeadline(ctx)
	r.cancel()
	st, retryAfter := s.toStatus(ctx, r, err, cut)
	if retryAfter > 0 {
		setTrailer(metadata.Pairs("retry-after", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10)))
	}
	code := st.Code()
	d := time.Since(r.start)
	m := s.metrics.method(r.method)
	m.handled(code).Inc()
	m.duration.Observe(d.Seconds())
	s.log.LogAttrs(ctx, slog.LevelInfo, "rpc",
		slog.String("method", r.method),
		slog.String("code", codeName(code)),
		slog.Duration("duration", d))
	return st.Err()
}

// toStatus is the one place a handler's error becomes a status: a problem
// (every plugin's dependency error is one) by its HTTP status, so an outage
// or an open breaker is UNAVAILABLE with the dependency named in the
// message; a status error as itself; a deadline as DEADLINE_EXCEEDED; a
// cancel as CANCELLED; anything else INTERNAL with no detail (the error goes
// to the log). When the call's own deadline cut it (cut), a success, a
// cancel or an outage (a dependency call the deadline cut) is
// DEADLINE_EXCEEDED: the caller whose grpc-timeout passed was told so
// already.
func (s *server) toStatus(ctx context.Context, r *rpc, err error, cut bool) (*status.Status, time.Duration) {
	if err == nil && !cut {
		return status.New(codes.OK, ""), 0
	}
	if cut {
		if err == nil { // returned after its deadline: the caller was told so, or is now
			return status.New(codes.DeadlineExceeded, deadlineMessage), 0
		}
		switch code := status.Code(err); {
		case code == codes.Canceled, code == codes.Unavailable, code == codes.DeadlineExceeded,
			errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return status.New(codes.DeadlineExceeded, deadlineMessage), 0
		}
		if p, ok := problem.As(err); ok && codeForHTTP(p.Status) == codes.Unavailable {
			return status.New(codes.DeadlineExceeded, deadlineMessage), 0
		}
	}
	if p, ok := problem.As(err); ok {
		code := codeForHTTP(p.Status)
		msg := p.Detail
		if code == codes.Internal || code == codes.Unknown {
			msg = "internal error"
		}
		if code == codes.Internal || code == codes.Unknown || code == codes.Unavailable {
			s.logFailure(ctx, r, code, err)
		}
		if dep, _ := p.Extensions["dependency"].(string); dep != "" {
			return dependencyStatus(code, msg, dep, p), p.RetryAfter
		}
		return status.New(code, msg), p.RetryAfter
	}
	if st, ok := status.FromError(err); ok {
		if st.Code() == codes.Internal || st.Code() == codes.Unknown {
			s.logFailure(ctx, r, st.Code(), err)
		}
		return st, 0
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, deadlineMessage), 0
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, "the call was cancelled"), 0
	}
	s.logFailure(ctx, r, codes.Internal, err)
	return status.New(codes.Internal, "internal error"), 0
}

// dependencyStatus is the status of a problem naming the dependency that
// failed (every plugin's 503): the message names it, even when the
// problem's detail does not ("dependency 'db': the order could not be
// saved"), and an ErrorInfo detail carries it, as the HTTP 503's
// "dependency" member does, with the "upstream" and "route" members when the
// problem has them, for a caller that reads details rather than messages.
func dependencyStatus(code codes.Code, msg, dep string, p *problem.Problem) *status.Status {
	if !namesWord(msg, dep) {
		msg = fmt.Sprintf("dependency '%s': %s", dep, msg)
	}
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{
		Reason:   "DEPENDENCY_FAILED",
		Domain:   "jfast",
		Metadata: map[string]string{"dependency": dep},
	}
	for _, k := range []string{"upstream", "route"} {
		if v, _ := p.Extensions[k].(string); v != "" {
			info.Metadata[k] = v
		}
	}
	if withInfo, err := st.WithDetails(info); err == nil {
		return withInfo
	}
	return st
}

// namesWord reports whether s holds word with no letter, digit, '-' or '_'
// on either side ("db" is in "db is unavailable", not in "feedback").
func namesWord(s, word string) bool {
	inName := func(b byte) bool {
		return b == '-' || b == '_' || '0' <= b && b <= '9' || 'a' <= b|0x20 && b|0x20 <= 'z'
	}
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(word)
		if (j == 0 || !inName(s[j-1])) && (end == len(s) || !inName(s[end])) {
			return true
		}
		i = j + 1
	}
}

// deadlineMessage is the message of a call its deadline ended.
const deadlineMessage = "the call did not finish within its deadline"

func (s *server) logFailure(ctx context.Context, r *rpc, code codes.Code, err error) {
	s.log.LogAttrs(ctx, slog.LevelError, "rpc failed",
		slog.String("method", r.method), slog.String("code", codeName(code)), slog.String("error", err.Error()))
}

// codesOfHTTP maps a problem's HTTP status to its gRPC code; a status it
// does not list is FAILED_PRECONDITION in 4xx, INTERNAL otherwise.
var codesOfHTTP = map[int]codes.Code{
	http.StatusBadRequest:          codes.InvalidArgument,
	http.StatusUnprocessableEntity: codes.InvalidArgument,
	http.StatusUnauthorized:        codes.Unauthenticated,
	http.StatusForbidden:           codes.PermissionDenied,
	http.StatusNotFound:            codes.NotFound,
	http.StatusConflict:            codes.Aborted,
	http.StatusPreconditionFailed:  codes.FailedPrecondition,
	http.StatusTooManyRequests:     codes.ResourceExhausted,
	http.StatusNotImplemented:      codes.Unimplemented,
	http.StatusMethodNotAllowed:    codes.Unimplemented,
	http.StatusBadGateway:          codes.Unavailable,
	http.StatusServiceUnavailable:  codes.Unavailable,
	http.StatusGatewayTimeout:      codes.DeadlineExceeded,
	http.StatusRequestTimeout:      codes.DeadlineExceeded,
}

// codeForHTTP is the gRPC code of a problem's HTTP status.
func codeForHTTP(s int) codes.Code {
	if c, ok := codesOfHTTP[s]; ok {
		return c
	}
	if s >= 400 && s < 500 {
		return codes.FailedPrecondition
	}
	return codes.Internal
}

// recovered logs a handler's panic with its stack and returns INTERNAL,
// with no detail for the caller.
func (s *server) recovered(ctx context.Context, r *rpc, v any) error {
	s.log.LogAttrs(ctx, slog.LevelError, "panic serving rpc",
		slog.String("method", r.method),
		slog.Any("panic", v),
		slog.String("stack", string(debug.Stack())))
	return status.Error(codes.Internal, "internal error")
}

// unary answers the call at its deadline whether or not the handler has
// returned: the handler runs on a goroutine of its own, so one that ignores
// its context (a blocking call no context reaches, a sleep) cannot hold the
// caller past the deadline, as an HTTP request's 503 does not wait for its
// handler either. The handler keeps running until it returns, with its
// context done; what it then returns is discarded (a WARN line says so), and
// until then it keeps its place in the front door's limit (shedder.unary
// runs inside this goroutine), so the limit counts work the process is still
// doing, as it does for HTTP.
func (s *server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, r := s.begin(ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
	setTrailer := func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) }
	done := make(chan unaryResult, 1)
	go s.runUnary(ctx, r, req, handler, done)
	select {
	case res := <-done:
		return res.resp, s.end(ctx, r, res.err, setTrailer)
	case <-ctx.Done():
	}
	if !r.state.CompareAndSwap(handlerRunning, handlerAbandoned) {
		// The handler returned as the context ended: end reads its result
		// against the deadline.
		res := <-done
		return res.resp, s.end(ctx, r, res.err, setTrailer)
	}
	return nil, s.end(ctx, r, ctx.Err(), setTrailer)
}

// unaryResult is what a unary handler returned.
type unaryResult struct {
	resp any
	err  error
}

// The states of rpc.state: a unary handler's answer goes to the caller only
// if it returns before the call is answered without it.
const (
	handlerRunning int32 = iota
	handlerReturned
	handlerAbandoned
)

// runUnary runs a unary handler, recovering its panic, and hands its result
// to unary, or, when the call was answered at its deadline without it, logs
// that it returned late.
func (s *server) runUnary(ctx context.Context, r *rpc, req any, handler grpc.UnaryHandler, done chan<- unaryResult) {
	var res unaryResult
	defer func() {
		if v := recover(); v != nil {
			res = unaryResult{err: s.recovered(ctx, r, v)}
		}
		if r.state.CompareAndSwap(handlerRunning, handlerReturned) {
			done <- res
			return
		}
		attrs := []slog.Attr{slog.String("method", r.method), slog.Duration("duration", time.Since(r.start))}
		if res.err != nil {
			attrs = append(attrs, slog.String("error", res.err.Error()))
		}
		s.log.LogAttrs(ctx, slog.LevelWarn, "rpc handler returned after its call was answered at its deadline; its result was discarded", attrs...)
	}()
	res.resp, res.err = handler(ctx, req)
}

// stream serves a stream on the handler's own goroutine: the handler owns
// the stream (gRPC forbids using it once the handler returned), so the call
// cannot be answered without it. Its deadline still bounds it: once the
// deadline passed, the stream's SendMsg and RecvMsg fail with
// DEADLINE_EXCEEDED, and the call ends DEADLINE_EXCEEDED whatever the
// handler returns.
func (s *server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	ctx, r := s.begin(ss.Context(), info.FullMethod, ss.SetHeader)
	defer func() {
		if v := recover(); v != nil {
			err = s.recovered(ctx, r, v)
		}
		err = s.end(ctx, r, err, ss.SetTrailer)
	}()
	return handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
}

// serverStream is a ServerStream whose context carries the request ID and
// the deadline, and whose messages stop at that deadline.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

func (s *serverStream) SendMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return s.ServerStream.SendMsg(m)
}

func (s *serverStream) RecvMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return s.ServerStream.RecvMsg(m)
}

// serverMetrics are the jfast_grpc_server_* collectors.
type serverMetrics struct {
	handledVec  *prometheus.CounterVec
	durationVec *prometheus.HistogramVec
	methods     sync.Map // method → *serverMethod
}

func newServerMetrics() *serverMetrics {
	return &serverMetrics{
		handledVec:  framework.NewCounterVec("jfast_grpc_server_handled_total", "RPCs this service served, by method and code.", "method", "code"),
		durationVec: framework.NewHistogramVec("jfast_grpc_server_handling_seconds", "Time serving an RPC, from its start to its status.", framework.LatencyBuckets, "method"),
	}
}

func (m *serverMetrics) register(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(m.handledVec), reg.Register(m.durationVec))
}

type serverMethod struct {
	set      *serverMetrics
	name     string
	duration prometheus.Observer
	mu       sync.Mutex
	codes    [codes.Unauthenticated + 1]prometheus.Counter
}

func (m *serverMetrics) method(name string) *serverMethod {
	if v, ok := m.methods.Load(name); ok {
		return v.(*serverMethod)
	}
	v, _ := m.methods.LoadOrStore(name, &serverMethod{set: m, name: name, duration: m.durationVec.WithLabelValues(name)})
	return v.(*serverMethod)
}

func (m *serverMethod) handled(code codes.Code) prometheus.Counter {
	if code > codes.Unauthenticated {
		return m.set.handledVec.WithLabelValues(m.name, codeName(code))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.codes[code] == nil {
		m.codes[code] = m.set.handledVec.WithLabelValues(m.name, codeName(code))
	}
	return m.codes[code]
}
