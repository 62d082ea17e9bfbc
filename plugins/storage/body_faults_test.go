package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// A response whose body breaks after S3 began it: gofakes3 (in process)
// behind a handler that sends the status line, the headers (with the whole
// body's Content-Length) and the first half of the body, then stalls, resets
// the connection or closes it. Only GET responses are cut (GetObject and
// ListObjectsV2), and only 200s unless cutErrors is set.

type bodyFault int32

const (
	bodyWhole bodyFault = iota
	bodyStall           // half the body, then nothing until the client leaves
	bodyReset           // half the body, then a TCP reset (SO_LINGER 0)
	bodyCut             // half the body, then a clean close (FIN)
)

func (f bodyFault) String() string {
	return [...]string{"whole", "stall", "reset", "cut"}[f]
}

type bodyFaultServer struct {
	*httptest.Server
	mode      atomic.Int32
	cutErrors atomic.Bool // cut error responses (a 404's body) too
	requests  atomic.Int64
	sent      chan struct{} // one value (if there is room) each time a half body has gone out

	mu       sync.Mutex
	hijacked map[net.Conn]struct{}
	handlers sync.WaitGroup
}

func newBodyFaultServer(t *testing.T) *bodyFaultServer {
	t.Helper()
	bs := &bodyFaultServer{hijacked: map[net.Conn]struct{}{}, sent: make(chan struct{}, 16)}
	s3 := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true)).Server()
	bs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bs.requests.Add(1)
		mode := bodyFault(bs.mode.Load())
		if mode == bodyWhole || r.Method != http.MethodGet {
			s3.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		s3.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK && !bs.cutErrors.Load() {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		bs.cut(t, w, rec, mode)
	}))
	t.Cleanup(func() {
		bs.mu.Lock()
		for c := range bs.hijacked {
			c.Close()
		}
		bs.mu.Unlock()
		bs.handlers.Wait()
		bs.CloseClientConnections()
		bs.Close()
	})
	return bs
}

func (bs *bodyFaultServer) set(m bodyFault) { bs.mode.Store(int32(m)) }

// drainSent forgets the half bodies sent so far.
func (bs *bodyFaultServer) drainSent() {
	for {
		select {
		case <-bs.sent:
		default:
			return
		}
	}
}

// cut writes rec's response by hand on the hijacked connection: all of it but
// the second half of the body, then what mode says.
func (bs *bodyFaultServer) cut(t *testing.T, w http.ResponseWriter, rec *httptest.ResponseRecorder, mode bodyFault) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	bs.handlers.Add(1)
	defer bs.handlers.Done()
	bs.mu.Lock()
	bs.hijacked[conn] = struct{}{}
	bs.mu.Unlock()
	defer func() {
		bs.mu.Lock()
		delete(bs.hijacked, conn)
		bs.mu.Unlock()
		conn.Close()
	}()
	body := rec.Body.Bytes()
	h := rec.Header().Clone()
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Transfer-Encoding")
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", rec.Code, http.StatusText(rec.Code))
	_ = h.Write(buf)
	_, _ = buf.WriteString("\r\n")
	_, _ = buf.Write(body[:len(body)/2])
	if err := buf.Flush(); err != nil {
		return
	}
	select {
	case bs.sent <- struct{}{}:
	default:
	}
	switch mode {
	case bodyStall:
		// Until the client closes the connection (its read gap, its
		// context), or the test's cleanup does.
		_, _ = io.Copy(io.Discard, conn)
	case bodyReset:
		// Loopback has delivered what was written: the client reads the
		// half body, then the reset.
		_ = conn.(*net.TCPConn).SetLinger(0)
	}
}

// startBodyFault starts a disk on a bodyFaultServer holding one object, "obj",
// of objSize bytes.
func startBodyFault(t *testing.T, extra ...string) (setup, *bodyFaultServer) {
	t.Helper()
	bs := newBodyFaultServer(t)
	s := start(t, s3TOML(bs.URL, "bodies", extra...), "files", nil)
	if err := s.disk.Put(context.Background(), "obj", bytes.NewReader(objBytes), ""); err != nil {
		t.Fatal(err)
	}
	return s, bs
}

// objSize is small enough that the half body sent before a reset is in the
// client's socket buffer before the reset arrives.
const objSize = 64 << 10

var objBytes = bytes.Repeat([]byte("0123456789abcdef"), objSize/16)

// errKind names what an error is, for the tests' messages and checks.
func errKind(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	}
	return "other"
}
