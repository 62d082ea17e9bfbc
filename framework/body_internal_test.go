package framework

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deadlineLog records the read deadlines set on it.
type deadlineLog struct{ reads []time.Time }

func (d *deadlineLog) SetReadDeadline(t time.Time) error {
	d.reads = append(d.reads, t)
	return nil
}

func (d *deadlineLog) SetWriteDeadline(time.Time) error { return nil }

// endingReader returns its bytes and io.EOF in one read, as net/http's
// chunked body does when the last chunk came with the data.
type endingReader struct{ r *strings.Reader }

func (e endingReader) Read(p []byte) (int, error) {
	n, _ := e.r.Read(p)
	if e.r.Len() == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (endingReader) Close() error { return nil }

// A body that goes over the limit with more to come gets the read deadline
// in the past, so the server does not wait for the rest; one whose read over
// the limit also ended it does not: the server is then reading the
// connection to hear the client go away, and a deadline in the past would
// fail that read and make the request look abandoned.
func TestTooLargeBodyDeadlineOnlyWhileTheBodyGoesOn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		deadlines int
	}{
		{"one byte over, ended in the same read", "01234567890", 0},
		{"one byte over, more to come", "0123456789012345", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := &deadlineLog{}
			b := &requestBody{src: endingReader{strings.NewReader(tc.body)}, header: http.Header{}, conn: conn, declared: -1, limit: 10}
			_, err := io.ReadAll(b)
			var tooLarge *http.MaxBytesError
			if !errors.As(err, &tooLarge) || b.header.Get("Connection") != "close" {
				t.Fatalf("err %v, Connection %q; want the MaxBytesError and the connection closed", err, b.header.Get("Connection"))
			}
			if len(conn.reads) != tc.deadlines {
				t.Fatalf("read deadlines set: %v; want %d", conn.reads, tc.deadlines)
			}
		})
	}
}
