package framework

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

// ResponseRecorder is the ResponseWriter every jfast request is served with. It
// records the status and size for the access log and metrics, and whether the
// response has started (after which an error can only be logged). Middleware finds
// it with a type assertion on the ResponseWriter; handlers need not know it.
type ResponseRecorder struct {
	http.ResponseWriter
	status  int
	written int64
	start   time.Time
	log     *slog.Logger
	// quiet leaves the request out of the access log: a request the front
	// door shed, which it logs once a second in aggregate.
	quiet bool
	// cut is the first error a write of the body returned (the client not
	// reading past the write deadline, a reset): the access log says the
	// response did not reach the client whole, which its status alone hides.
	cut error
	// aborted is a handler that aborted the response (http.ErrAbortHandler):
	// the client got it cut, or nothing, whatever status was written.
	aborted bool
	// unrouted is a request no route matched, which the framework's 404 or
	// 405 answered (setProblemHandlers): see RouteTemplate.
	unrouted bool
}

// Status returns the status written, or 0 when nothing has been written yet.
func (w *ResponseRecorder) Status() int { return w.status }

// Written returns the number of body bytes written.
func (w *ResponseRecorder) Written() int64 { return w.written }

// answered returns the status the request goes out with, as the access log
// records it, given v, what its handler panicked with (nil when it
// returned): the status written, or 200 when nothing was (net/http's); a
// panic before anything was written, other than an abort, is answered 500
// by the recovery (serveRequest.recover), and any other is aborted after
// the status that went out.
func (w *ResponseRecorder) answered(v any) int {
	switch {
	case w.status != 0:
		return w.status
	case v != nil && v != http.ErrAbortHandler:
		return http.StatusInternalServerError
	}
	return http.StatusOK
}

// Started reports whether the status line has been sent.
func (w *ResponseRecorder) Started() bool { return w.status != 0 }

// StartTime is when the request entered the framework's middleware.
func (w *ResponseRecorder) StartTime() time.Time { return w.start }

func (w *ResponseRecorder) WriteHeader(code int) {
	// A code over 999 is not recorded: net/http panics on it before
	// anything is sent, and the recovery answers 500.
	if w.status == 0 && code >= 200 && code <= 999 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ResponseRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.written += int64(n)
	if err != nil && w.cut == nil {
		w.cut = err
	}
	return n, err
}

// Flush sends buffered data to the client when the underlying writer can.
func (w *ResponseRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *ResponseRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ResponseStatus returns the status the response went out with: the
// [ResponseRecorder]'s (or any writer's with a Status method) found through
// w and the writers wrapping it (Unwrap). It is 200 when the handler wrote
// nothing, which net/http then sends, and when no writer on the way records
// a status (outside a jfast App). Middleware that reports a request after
// its handler returns (a span, a route's metrics) reads it.
func ResponseStatus(w http.ResponseWriter) int {
	for {
		var s int
		switch x := w.(type) {
		case *ResponseRecorder: // the usual case, without an interface lookup
			s = x.Status()
		case interface{ Status() int }:
			s = x.Status()
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
			continue
		default:
			return http.StatusOK
		}
		if s == 0 {
			return http.StatusOK // nothing written yet: net/http sends 200
		}
		return s
	}
}

// SetHijackedStatus records status as the one the response went out with,
// on the [ResponseRecorder] found through w and the writers wrapping it,
// for a response the handler wrote on a connection it hijacked: a reverse
// proxy passing a WebSocket upgrade on writes the upstream's 101 itself,
// past the ResponseWriter, so without it the access log, the request
// metrics and [ResponseStatus] would say 200. It does nothing when a
// status was already recorded, or when w has no recorder.
func SetHijackedStatus(w http.ResponseWriter, status int) {
	if rec := recorderOf(w); rec != nil && rec.status == 0 {
		rec.status = status
	}
}

// recorderOf returns the [ResponseRecorder] found through w and the writers
// wrapping it (Unwrap), or nil outside a jfast App.
func recorderOf(w http.ResponseWriter) *ResponseRecorder {
	for {
		switch x := w.(type) {
		case *ResponseRecorder:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// exchange is what the framework keeps per request, pooled: the recorder the
// response goes through, the wrapper the body is read through, and what a
// shutdown that cuts the request logs about it.
type exchange struct {
	rec    ResponseRecorder
	body   requestBody
	permit heldPermit // the front door's slot, while held

	method, path, id string
	prev, next       *exchange // in the inflight list
}

var (
	exchangePool = sync.Pool{New: func() any { return new(exchange) }}
	routePool    = sync.Pool{New: func() any { return chi.NewRouteContext() }}
)

// serveRequest is the framework's middleware, fused into one handler around the
// service's chi router so a request pays for one context and one request copy:
// the request ID and the request deadline (one context), then the access log,
// the panic recovery inside it (a panicking request is logged with its 500),
// the front door, and chi with the plugins' middleware. The request's values (requestValues) also carry chi's routing
// context, taken from a pool here, so chi does not make a context and a
// request copy of its own.
type serveRequest struct {
	mux      *chi.Mux
	timeout  time.Duration
	maxBody  int64
	log      *slog.Logger
	sources  *atomic.Pointer[[]LogSource]
	inflight *inflight
	front    *frontDoor // nil: no concurrency limit (the admin listener, or app.overload.enabled = false)
	// framing: this is the server's handler, which refuses the requests
	// its connection's framing follower marks (framing.go).
	framing bool
}

func (s *serveRequest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var refusal *problem.Problem
	if s.framing {
		refusal = framingVerdict(r) // every request the server reads counts
	}
	ex := exchangePool.Get().(*exchange)
	ex.rec = ResponseRecorder{ResponseWriter: w, start: time.Now(), log: s.log}
	rec := &ex.rec
	defer exchangePool.Put(ex)

	// Request ID (a sane inbound one, else a fresh one, echoed), the request
	// deadline and the routing context, in one context. When the service is
	// mounted under another chi router, that router's routing context (with
	// the path left to route) is kept.
	var route *chi.Context
	if chi.RouteContext(r.Context()) == nil {
		route = routePool.Get().(*chi.Context)
		route.Reset()
		route.Routes = s.mux
		defer routePool.Put(route)
	}
	timeout, expired := callerTimeout(r.Header, s.timeout)
	values, ctx, cancel := requestContext(r.Context(), requestid.Inbound(r.Header), w.Header(), rec.start, timeout, route)
	defer values.end()
	defer cancel()
	r = r.WithContext(ctx)
	deadline, _ := ctx.Deadline()
	s.bound(ex, w, r, deadline)
	ex.method, ex.path, ex.id = r.Method, r.URL.Path, values.id
	s.inflight.add(ex)
	defer s.inflight.remove(ex)

	defer s.accessLog(rec, r, values.id)
	defer s.recover(rec, r)
	s.handle(ex, values, r, expired, refusal)
}

// handle serves the request once the framework has set it up: the front
// door, then the service's router. It is ServeHTTP's own function so that
// ServeHTTP, with one return, has its defers open-coded: with the returns
// here among them the compiler would keep them in a list and run them
// through the runtime, a cost of every request.
func (s *serveRequest) handle(ex *exchange, values *requestValues, r *http.Request, expired bool, refusal *problem.Problem) {
	rec := &ex.rec
	if refusal != nil || optionsStar(r) {
		answerFraming(rec, r, refusal)
		return
	}
	if expired {
		// The caller has given up already: running the handler would be
		// work nobody waits for.
		closeUnread(rec, r)
		problem.Write(rec, r, problem.ServiceUnavailable("", detailCallerExpired, 0))
		return
	}
	if s.front != nil {
		// Before any handler work: a request over the limit waits here, and
		// its wait is in the access log's duration and the metrics'.
		if !s.front.admit(rec, r, &ex.permit) {
			return
		}
		values.permit.Store(&ex.permit)
		defer func() { ex.permit.release(!clientLeft(r)) }()
	}
	s.mux.ServeHTTP(rec, r)
	if !rec.Started() && clientLeft(r) {
		// The handler gave up with its client and wrote nothing: the
		// status net/http would send (200) is not what happened.
		clientGone(rec, r)
	}
}

// bound holds the client to the request's deadline. The connection's write
// deadline is the request's plus WriteGrace, so a client that does not read
// the response fails the handler's writes instead of blocking them; for a
// request with a body, the read deadline is the request's, so a client that
// trickles its body fails the handler's reads (with a 408) instead of holding
// them. net/http clears the read deadline once the body has been read (it
// then watches the connection for the client going away) and both deadlines
// before the next request on the connection. The body is read through the
// route's byte limit.
func (s *serveRequest) bound(ex *exchange, w http.ResponseWriter, r *http.Request, deadline time.Time) {
	hasBody := r.Body != nil && r.Body != http.NoBody
	d := deadlinesOf(w)
	if d != nil {
		_ = d.SetWriteDeadline(deadline.Add(WriteGrace))
		if hasBody {
			_ = d.SetReadDeadline(deadline)
		}
	}
	if hasBody {
		ex.body = requestBody{src: r.Body, header: w.Header(), conn: d, declared: r.ContentLength, limit: s.maxBody}
		if r.ContentLength <= 0 {
			ex.body.declared = -1
		}
		r.Body = &ex.body
	}
}

// closeUnread asks for the connection's close after the answer to r, whose
// body (if it has one) is left unread: net/http would otherwise read the
// rest of it (up to 256 KiB) before sending the answer, waiting until the
// request's deadline for a client that holds it back, where an answer that
// refuses the request is meant to go at once.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// TimeoutHeader carries, on a request from one jfast service to another, the
// time the caller has left for it, in whole milliseconds (the http plugin sets
// it on every call). A jfast server serves the request with the sooner of
// that and app.request_timeout as its deadline, and answers one that arrives
// with none left (0 or less) at once with a 503, without running the
// handler. It is relative, as gRPC's grpc-timeout is, so the two hosts'
// clocks need not agree; a value that is not a whole number is ignored.
const TimeoutHeader = "Jfast-Timeout-Ms"

const detailCallerExpired = "the caller's deadline had passed before the request arrived"

// callerTimeout returns the request's timeout: app.request_timeout, capped
// by the caller's time left (TimeoutHeader), and whether the caller's time
// had already run out.
func callerTimeout(h http.Header, timeout time.Duration) (time.Duration, bool) {
	v := h[TimeoutHeader]
	if len(v) == 0 {
		return timeout, false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v[0]), 10, 64)
	switch {
	case err != nil:
		return timeout, false
	case ms <= 0:
		return timeout, true
	case ms < timeout.Milliseconds():
		return time.Duration(ms) * time.Millisecond, false
	}
	return timeout, false
}

// recover answers a request whose handler panicked: with a 500 problem when
// nothing was sent yet. A panic after the response started can no longer
// become a problem, and returning would let net/http end the body properly,
// so the client would read a complete-looking response; it is aborted
// instead, as a handler's own panic(http.ErrAbortHandler) is: net/http cuts
// the connection (or resets the HTTP/2 stream) without logging, and the
// access log, which runs next, marks the line aborted with the status that
// went out.
func (s *serveRequest) recover(w *ResponseRecorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v != http.ErrAbortHandler {
		s.log.LogAttrs(r.Context(), slog.LevelError, "panic serving request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			// As text, so the logger's masking sees what the panic held.
			slog.String("panic", fmt.Sprint(v)),
			slog.String("stack", string(debug.Stack())))
		if !w.Started() {
			problem.Write(w, r, problem.Internal())
			return
		}
	}
	w.aborted = true
	panic(http.ErrAbortHandler)
}

// accessLog writes one line per request, straight to the logger's handler: a
// record built here needs no caller's program counter, which slog.Logger would
// take with runtime.Callers on every request (the handlers are not configured to
// print a source). Without log sources it logs with a background context and
// the request ID as an attribute: five attributes fit in a slog.Record without
// allocating, and the context handler would otherwise add a sixth. With log
// sources (telemetry's trace and span IDs) it logs with the request's context,
// which adds the request ID and theirs.
func (s *serveRequest) accessLog(w *ResponseRecorder, r *http.Request, id string) {
	if w.quiet {
		return
	}
	h := s.log.Handler()
	if !h.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	status := w.answered(nil) // the recovery, which ran before, wrote its 500
	now := time.Now()
	rec := slog.NewRecord(now, slog.LevelInfo, "request", 0)
	rec.AddAttrs(
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", now.Sub(w.start)))
	ctx := context.Background()
	if srcs := s.sources.Load(); srcs != nil && len(*srcs) > 0 {
		ctx = r.Context()
	} else {
		rec.AddAttrs(slog.String("request_id", id))
	}
	if w.cut != nil {
		rec.AddAttrs(slog.String("write_error", w.cut.Error()))
	}
	if w.aborted {
		rec.AddAttrs(slog.Bool("aborted", true))
	}
	_ = h.Handle(ctx, rec)
}
