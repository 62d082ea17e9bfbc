package idempotency

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// captureWriter keeps a copy of the response's status, allow-listed headers
// and body (up to limit bytes) for the store, and holds the response back
// while that copy is whole, so that the middleware can send it with its
// Content-Length before the store is written (send). Passed straight
// through, a response net/http buffers (up to 2 KiB, its
// bufferBeforeChunkingSize) would go out only when the whole chain
// returned, after the store's call; and a response flushed early without a
// length ends (its last chunk) only then too. What the handler flushes,
// hijacks or writes past limit, and a response whose length the handler
// set, go on at once.
type captureWriter struct {
	http.ResponseWriter
	allowed  []string
	limit    int
	status   int
	header   http.Header
	body     bytes.Buffer
	overflow bool
	// sent is set once the status (and the body held until then) went to
	// the underlying writer: what comes after passes straight through.
	sent     bool
	hijacked bool
}

func (w *captureWriter) WriteHeader(code int) {
	switch {
	case w.status == 0 && (code < 100 || code > 999):
		// net/http panics on such a code as a first status: in the
		// handler, whose panic releases the key, not when the held status
		// is sent after it returned, which would leave the key held until
		// its lease ends. A second one it drops, as it drops any.
		w.ResponseWriter.WriteHeader(code)
	case code < 200 || w.sent:
		// An interim response goes at once; a second status goes to
		// net/http, which ignores it (and logs it).
		w.ResponseWriter.WriteHeader(code)
	case w.status == 0:
		w.begin(code)
	}
	// A second status while the first is held is dropped, as net/http
	// drops it.
}

// begin records the response's status and headers. A response whose
// length the handler set, or that declares trailers (sent after a chunked
// body), is not held: there is no length for the middleware to give it.
func (w *captureWriter) begin(code int) {
	w.status = code
	w.snapshot()
	h := w.ResponseWriter.Header()
	if h.Get("Content-Length") != "" || h.Get("Transfer-Encoding") != "" || h["Trailer"] != nil {
		w.pass()
	}
}

func (w *captureWriter) snapshot() {
	h := w.ResponseWriter.Header()
	for _, k := range w.allowed {
		if vs, ok := h[k]; ok {
			if w.header == nil {
				w.header = http.Header{}
			}
			w.header[k] = append([]string(nil), vs...)
		}
	}
}

// pass sends on what is held: the status and the body written so far.
func (w *captureWriter) pass() {
	if w.sent {
		return
	}
	w.sent = true
	if w.status == 0 {
		return
	}
	w.ResponseWriter.WriteHeader(w.status)
	if w.body.Len() > 0 {
		_, _ = w.ResponseWriter.Write(w.body.Bytes())
	}
}

func (w *captureWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.begin(http.StatusOK)
	}
	if !w.overflow {
		if w.body.Len()+len(b) > w.limit {
			w.overflow = true
			w.pass() // what is held goes before the copy is dropped
			w.body = bytes.Buffer{}
		} else {
			w.body.Write(b)
			if !w.sent {
				return len(b), nil
			}
		}
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher when the underlying writer does: what is
// held goes first.
func (w *captureWriter) Flush() {
	if w.status == 0 {
		w.begin(http.StatusOK)
	}
	w.pass()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack lets the handler take the connection through the underlying
// writer (http.ErrNotSupported when none can give it); as net/http does, a
// status written before goes first. http.ResponseController finds it
// before Unwrap, so the middleware knows not to send the response.
func (w *captureWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.pass()
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	w.hijacked = err == nil
	return c, rw, err
}

// send sends the response the handler returned to the client before the
// store is written: a held response goes with its Content-Length (as
// net/http gives a response it buffered whole), and everything is flushed.
// A handler that wrote nothing is left to net/http, which answers 200 when
// the request ends (or records that the client left); a writer outside
// that cannot flush (http.ErrNotSupported) sends the response then too.
func (w *captureWriter) send(head bool) {
	if w.hijacked || w.status == 0 {
		return
	}
	if !w.sent && bodyAllowed(w.status) && (!head || w.body.Len() > 0) && !hasTrailers(w.ResponseWriter.Header()) {
		w.ResponseWriter.Header().Set("Content-Length", strconv.Itoa(w.body.Len()))
	}
	w.pass()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// bodyAllowed reports whether a final response with this status has a body
// (RFC 9110, sections 15.3.5 and 15.4.5).
func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}

// hasTrailers reports whether h holds trailers set after the header
// (http.TrailerPrefix), which net/http sends after a chunked body.
func hasTrailers(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// Unwrap lets http.ResponseController and the framework reach the underlying writer.
func (w *captureWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Started reports whether the handler wrote a status, held or passed on:
// framework.WriteError then knows the response started, and aborts it
// instead of appending a problem to a held body.
func (w *captureWriter) Started() bool { return w.status != 0 }
