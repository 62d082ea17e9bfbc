package framework

import (
	"bytes"
	"context"
	"math"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/jfastframework/jfast/problem"
)

// A request with both Content-Length and Transfer-Encoding is framed two
// ways: net/http reads it by Transfer-Encoding (RFC 9112 §6.3) and drops the
// Content-Length, but keeps the connection open, where the RFC requires it
// to be closed after the response — a proxy in front that read the same
// bytes by Content-Length would take the rest of the body for the next
// request (request smuggling). net/http leaves no trace of the dropped
// header in the request, so the framework follows the framing of every
// request on the connection itself: framingConn reads the bytes the server
// reads, request head by request head, skipping bodies by their length or
// their chunks, and marks the first head that carried both headers. The
// outermost handler answers that request 400 and closes the connection.

// framingListener wraps every accepted connection in a framingConn.
type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c}, nil
}

type framingKey struct{}

// framingContext is the server's ConnContext: the connection's requests find
// it in their context.
func framingContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framingConn); ok {
		return context.WithValue(ctx, framingKey{}, fc)
	}
	return ctx
}

// refuseAmbiguousFraming makes next the server's handler, refusing with a
// 400, the connection then closed, the request whose head carried both
// Content-Length and Transfer-Encoding; the requests before it on the
// connection are served. The framework's own handler (serveRequest) answers
// the refusal itself, with the request ID and the access log line every
// answer has; any other handler is wrapped.
//
// A request the follower cannot follow (a Content-Length that is not plain
// digits or whose line is too long to hold, a folded one, a chunk size over
// 16 hex digits) is refused the same way, and so is every request after a
// body it could not follow: where the framework cannot tell how the server
// framed the bytes, it does not serve them.
//
// The server gives "OPTIONS *" to the handler too
// (DisableGeneralOptionsHandler), so that every request the server reads is
// counted; it is answered as net/http would, 200 with no body.
func refuseAmbiguousFraming(next http.Handler) http.Handler {
	if s, ok := next.(*serveRequest); ok {
		s.framing = true
		return s
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := framingVerdict(r); p != nil || optionsStar(r) {
			answerFraming(w, r, p)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// framingVerdict counts r, a request the server read, on its connection's
// follower and returns the problem it is refused with, or nil.
func framingVerdict(r *http.Request) *problem.Problem {
	fc, ok := r.Context().Value(framingKey{}).(*framingConn)
	if !ok {
		return nil
	}
	n := fc.served.Add(1)
	if at := fc.ambiguousAt.Load(); at != 0 && n >= at {
		return problem.New(http.StatusBadRequest, "the request has both Content-Length and Transfer-Encoding: send one of them")
	}
	if at := fc.lostAt.Load(); at != 0 && n >= at {
		return problem.New(http.StatusBadRequest,
			"the request's framing cannot be followed (a Content-Length that is not plain digits, a folded or overlong Content-Length line, a chunk size over 16 hex digits, or such a request before it on the connection): send a plain Content-Length or chunked body")
	}
	return nil
}

// optionsStar reports whether r is "OPTIONS *", which net/http would answer
// itself.
func optionsStar(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.RequestURI == "*"
}

// answerFraming answers a request refused for its framing (p), closing the
// connection, or "OPTIONS *" (p nil) as net/http would.
func answerFraming(w http.ResponseWriter, r *http.Request, p *problem.Problem) {
	if p == nil {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Connection", "close")
	problem.Write(w, r, p)
}

// framingConn follows the HTTP/1.1 framing of the requests read from it.
type framingConn struct {
	net.Conn
	served      atomic.Int64 // requests the handler was given
	ambiguousAt atomic.Int64 // the 1-based number of the first ambiguous head; 0 for none
	lostAt      atomic.Int64 // the number of the first request the follower could not follow; 0 for none

	state   framingState
	heads   int64
	left    int64 // body or chunk bytes still to skip
	line    [48]byte
	lineLen int      // bytes of the current line held (at most len(line))
	lineAll int      // bytes of the current line seen
	tail    [10]byte // the current line's last bytes, for a long request line's version
	// the head being read
	headLine     int
	http10       bool
	post         bool // the head's method is POST
	sawCL, sawTE bool
	length       int64
	// crlf is how many CR or LF bytes before the next request line the
	// server discards: up to 4 after a POST (net/http's tolerance for old
	// clients that sent a CRLF after a POST body), none otherwise.
	crlf int
}

type framingState uint8

const (
	stateHead      framingState = iota // reading a request line or a header line
	stateBody                          // skipping left bytes of a body
	stateChunkSize                     // reading a chunk-size line
	stateChunkData                     // skipping left bytes of chunk data and its CRLF
	stateTrailer                       // reading trailer lines
	stateLost                          // not following any more (a malformed or refused request)
)

// Read reads from the connection and follows what it read. It runs on the
// server's reading goroutine only.
func (c *framingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.state != stateLost {
		c.follow(p[:n])
	}
	return n, err
}

func (c *framingConn) follow(b []byte) {
	for len(b) > 0 && c.state != stateLost {
		if c.crlf > 0 && c.state == stateHead && c.headLine == 0 && c.lineAll == 0 {
			// Before the request line after a POST, as the server does.
			if b[0] == '\r' || b[0] == '\n' {
				b, c.crlf = b[1:], c.crlf-1
				continue
			}
			c.crlf = 0
		}
		switch c.state {
		case stateBody, stateChunkData:
			skip := min(int64(len(b)), c.left)
			b, c.left = b[skip:], c.left-skip
			if c.left == 0 {
				if c.state == stateBody {
					c.state = stateHead
				} else {
					c.state = stateChunkSize
				}
			}
		default:
			i := bytes.IndexByte(b, '\n')
			if i >= 0 && c.lineAll == 0 {
				// The whole line is in b (the usual case: a head comes in
				// one read): it is read where it is, without being copied.
				b = c.wholeLine(b[:i], b[i+1:])
				continue
			}
			part := b
			if i >= 0 {
				part = b[:i]
			}
			k := copy(c.line[c.lineLen:], part)
			c.lineLen += k
			c.lineAll += len(part)
			if len(part) >= len(c.tail) {
				copy(c.tail[:], part[len(part)-len(c.tail):])
			} else {
				copy(c.tail[:], c.tail[len(part):])
				copy(c.tail[len(c.tail)-len(part):], part)
			}
			if i < 0 {
				return
			}
			b = b[i+1:]
			line := bytes.TrimSuffix(c.line[:c.lineLen], []byte("\r"))
			all := c.lineAll
			c.lineLen, c.lineAll = 0, 0
			if all > 0 && c.line[min(all, len(c.line))-1] == '\r' && all <= len(c.line) {
				all--
			}
			c.endLine(line, all)
		}
	}
}

// wholeLine handles line, a line (without its LF) that began in the bytes
// read now, as follow does a line gathered over several reads: its first
// len(c.line) bytes without a trailing CR, and its length, less the CR when
// that fits in c.line. It returns rest.
func (c *framingConn) wholeLine(line, rest []byte) []byte {
	if c.state == stateHead && c.headLine == 0 {
		// A request line's last bytes give its version; no other line's
		// are read.
		if n := len(line); n >= len(c.tail) {
			copy(c.tail[:], line[n-len(c.tail):])
		} else {
			copy(c.tail[:], c.tail[n:])
			copy(c.tail[len(c.tail)-n:], line)
		}
	}
	all := len(line)
	if all > len(c.line) {
		line = line[:len(c.line)]
	} else if all > 0 && line[all-1] == '\r' {
		all--
	}
	c.endLine(bytes.TrimSuffix(line, []byte("\r")), all)
	return rest
}

// endLine handles one line of a head, a chunk size or a trailer: line is
// its first bytes (without the CR), all its whole length.
func (c *framingConn) endLine(line []byte, all int) {
	switch c.state {
	case stateChunkSize:
		size, ok := chunkSize(line)
		switch {
		case !ok:
			c.lose()
		case size == 0:
			c.state = stateTrailer
		default:
			c.state, c.left = stateChunkData, size+2 // the data's CRLF
		}
	case stateTrailer:
		if all == 0 {
			c.state = stateHead
		}
	case stateHead:
		c.headerLine(line, all)
	}
}

func (c *framingConn) headerLine(line []byte, all int) {
	if c.headLine == 0 {
		if all == 0 {
			return // an empty line before a request line is ignored
		}
		c.headLine, c.sawCL, c.sawTE, c.length, c.crlf = 1, false, false, 0, 0
		c.http10 = bytes.HasSuffix(bytes.TrimSuffix(c.tail[:], []byte("\r")), []byte(" HTTP/1.0"))
		c.post = bytes.HasPrefix(line, []byte("POST "))
		return
	}
	if all > 0 {
		c.headLine++
		// The name is what comes before the line's first ":"; neither
		// name holds one, so a line names one when the ":" is right after it.
		switch {
		case hasName(line, "content-length"):
			c.sawCL = true
			n, ok := contentLength(bytes.TrimSpace(line[len("content-length:"):]))
			if !ok || all > len(c.line) {
				c.lose() // the server refuses it, or reads it in a way this does not
				return
			}
			c.length = n
		case hasName(line, "transfer-encoding"):
			c.sawTE = true
		}
		return
	}
	// The head ends.
	c.heads++
	c.headLine = 0
	if c.post {
		c.crlf = 4
	}
	switch {
	case c.sawCL && c.sawTE:
		c.ambiguousAt.CompareAndSwap(0, c.heads)
		c.state = stateLost // the connection closes after this request
	case c.sawTE && !c.http10:
		c.state = stateChunkSize
	case c.length > 0:
		c.state, c.left = stateBody, c.length
	}
}

// lose stops following: the bytes from here on cannot be told apart, so the
// request being read (when a head is: the next one to be counted) and every
// one after it are refused.
func (c *framingConn) lose() {
	c.lostAt.CompareAndSwap(0, c.heads+1)
	c.state = stateLost
}

// chunkSize parses a chunk-size line (hex digits, then extensions).
func chunkSize(line []byte) (int64, bool) {
	var n int64
	digits := 0
	for _, ch := range line {
		var d byte
		switch {
		case ch >= '0' && ch <= '9':
			d = ch - '0'
		case ch >= 'a' && ch <= 'f':
			d = ch - 'a' + 10
		case ch >= 'A' && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return n, digits > 0
		}
		if digits++; digits > 16 || n > math.MaxInt64>>4 {
			return 0, false // net/http refuses 17 digits; a size over MaxInt64 is never sent
		}
		n = n<<4 | int64(d)
	}
	return n, digits > 0
}

func contentLength(v []byte) (int64, bool) {
	for len(v) > 1 && v[0] == '0' {
		v = v[1:] // net/http reads leading zeros
	}
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, ch := range v {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	return n, true
}

// hasName reports whether the header line is named name (lowercase, no
// ":"), in any case.
func hasName(line []byte, name string) bool {
	return len(line) > len(name) && line[len(name)] == ':' && asciiEqualFold(line[:len(name)], name)
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		ch := b[i]
		if ch >= 'A' && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != s[i] {
			return false
		}
	}
	return true
}
