package framework

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/jfastframework/jfast/problem"
)

// DefaultMaxBodyBytes is app.max_body_bytes's default, 1 MiB: room for any JSON
// document a service reasonably takes in one request, small enough that a
// thousand concurrent uploads of it fit in memory. Routes that take files raise
// it with [MaxBodyBytes].
const DefaultMaxBodyBytes = 1 << 20

// WriteGrace is how long past its deadline a request may still write: enough
// to send the 503 (or the 408) that says the deadline passed, while a client
// that does not read cannot hold the handler longer than that. A plugin whose
// rule depends on when a request's writes end (the idempotency lease) reads it
// here.
const WriteGrace = time.Second

// requestBody is the body of every request that has one, as the framework
// serves it. It stops at the route's limit (app.max_body_bytes, or
// [MaxBodyBytes]) with an *http.MaxBytesError, which renders as 413, and
// gives a read cut by the request's deadline (the connection's read deadline,
// set from it) an error that renders as 408. Any other read error is the
// client's (a connection reset, a truncated or malformed chunked body) and
// renders as 400.
type requestBody struct {
	src      io.ReadCloser
	header   http.Header   // the response's, to ask for the connection's close
	conn     connDeadlines // the connection's, to end a wait for the unread rest; nil when none
	declared int64         // the request's Content-Length, or -1
	limit    int64
	read     int64
	err      error // sticky: once the limit or a read error is hit
}

func (b *requestBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.declared > b.limit {
		return 0, b.tooLarge(false)
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Read one byte more than the limit allows, to tell a body of exactly
	// limit bytes from a longer one.
	if left := b.limit - b.read; int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := b.src.Read(p)
	b.read += int64(n)
	if b.read > b.limit {
		n -= int(b.read - b.limit)
		b.read = b.limit
		return n, b.tooLarge(err == io.EOF)
	}
	if err != nil && err != io.EOF {
		b.err = bodyError(err)
		// The rest of the body cannot be trusted to arrive: ask the server
		// not to read it before the next request.
		b.header.Set("Connection", "close")
		err = b.err
	}
	return n, err
}

// tooLarge fails the body for being over the limit; ended says the read
// that went over it also read the body to its end.
func (b *requestBody) tooLarge(ended bool) error {
	b.err = &http.MaxBytesError{Limit: b.limit}
	// The server would read up to 256 KiB of the rest to keep the connection
	// (maxPostHandlerReadBytes in net/http): before the response when the
	// connection is kept, after it otherwise, waiting until the request's
	// deadline (the read deadline) for a client that holds the rest back. A
	// body over the limit is not worth it: the connection is closed, and
	// the read deadline passed, so that read fails at once. A body read to
	// its end (a chunked one a byte over, its last chunk with it) leaves
	// nothing to read, and net/http is then reading the connection to hear
	// the client go away: a deadline in the past would fail that read, and
	// the request would be taken for one whose client left (a 499 in place
	// of the 413).
	b.header.Set("Connection", "close")
	if b.conn != nil && !ended {
		_ = b.conn.SetReadDeadline(time.Unix(1, 0))
	}
	return b.err
}

// DeclaredBodyTooLarge returns the *http.MaxBytesError of a request whose
// Content-Length is over its body limit ([BodyLimit]), without reading the
// body, and nil for any other. A handler returns the error as is: a 413
// problem, after which the connection is closed at once (the body, never
// read, leaves it unusable; net/http would otherwise wait for up to 256 KiB
// of it until the request's deadline). [DecodeJSON] and any read of the
// body answer the same; a handler that passes the body on (a proxy) calls
// it before sending anything.
func DeclaredBodyTooLarge(r *http.Request) error {
	if b, ok := r.Body.(*requestBody); ok {
		if b.declared > b.limit {
			return b.tooLarge(false)
		}
		return nil
	}
	if limit := bodyLimit(r); r.ContentLength > limit {
		return &http.MaxBytesError{Limit: limit}
	}
	return nil
}

func (b *requestBody) Close() error { return b.src.Close() }

// bodyError classifies a failed body read.
func bodyError(err error) error {
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return &BodyReadError{Err: err, Status: http.StatusRequestTimeout}
	}
	return &BodyReadError{Err: err, Status: http.StatusBadRequest}
}

// BodyReadError is a request body that could not be read to its end: the
// request's deadline passed while the client was still sending it (Status
// 408), or the client broke off or sent a malformed body (Status 400). A
// handler returns it as is; it renders as that problem.
type BodyReadError struct {
	Status int
	Err    error // the cause, for logs: errors.Is(err, os.ErrDeadlineExceeded) for a 408
}

func (e *BodyReadError) Error() string { return "read request body: " + e.Err.Error() }

func (e *BodyReadError) Unwrap() error { return e.Err }

// Problem renders the error without its cause.
func (e *BodyReadError) Problem() *problem.Problem {
	detail := "the request body could not be read to its end"
	if e.Status == http.StatusRequestTimeout {
		detail = "the request body did not arrive within the request's deadline"
	}
	p := problem.New(e.Status, detail)
	p.Err = e
	return p
}

// MaxBodyBytes returns middleware that sets the body limit of the routes it
// wraps to n bytes, in place of app.max_body_bytes: larger for uploads,
// smaller for routes that take a few fields.
//
//	r.With(framework.MaxBodyBytes(50<<20)).Put("/files/{name}", upload)
//
// Reading past the limit fails with *http.MaxBytesError, which a handler
// returns as is: a 413 problem. It panics when n is not positive: a route
// without a limit is a mistake to find at boot.
func MaxBodyBytes(n int64) func(http.Handler) http.Handler {
	if n <= 0 {
		panic("framework: MaxBodyBytes needs a positive limit, got " + strconv.FormatInt(n, 10))
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch b := r.Body.(type) {
			case *requestBody:
				b.limit = n
			case nil:
			default:
				if b != http.NoBody {
					// Not served by the framework's middleware (a test driving
					// the router, a body another middleware replaced).
					r.Body = http.MaxBytesReader(w, b, n)
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// BodyLimit returns the largest request body r may have: the route's
// MaxBodyBytes, or app.max_body_bytes. A handler that passes the body on
// (a proxy) compares a declared Content-Length with it before sending
// anything.
func BodyLimit(r *http.Request) int64 { return bodyLimit(r) }

// bodyLimit is the limit r's body is read under.
func bodyLimit(r *http.Request) int64 {
	if b, ok := r.Body.(*requestBody); ok {
		return b.limit
	}
	return DefaultMaxBodyBytes
}

// connDeadlines is what net/http's HTTP/1 and HTTP/2 response writers offer
// (what http.ResponseController calls), found without allocating.
type connDeadlines interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// deadlinesOf finds the writer that can set the connection's deadlines,
// through writers that wrap it, or nil (httptest's recorder).
func deadlinesOf(w http.ResponseWriter) connDeadlines {
	for {
		switch x := w.(type) {
		case connDeadlines:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}
