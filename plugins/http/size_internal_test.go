package http

import (
	"errors"
	"io"
	"net/http"
	"testing"
)

// endless is a body that never ends, counting what is read from it.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.read += int64(len(p))
	return len(p), nil
}

func (e *endless) Close() error { return nil }

// readBody never asks the body for more than limit+1 bytes, and never holds a
// buffer larger than that, whatever the body's length.
func TestReadBodyHoldsAtMostLimitPlusOne(t *testing.T) {
	t.Parallel()
	for _, limit := range []int64{1, 511, 512, 513, 4096, 1<<20 + 3} {
		body := &endless{}
		_, err := readBody(&http.Response{StatusCode: 200, ContentLength: -1, Body: body}, limit)
		var big *bodyTooLarge
		if !errors.As(err, &big) || big.declared != -1 {
			t.Fatalf("limit %d: err = %v, want bodyTooLarge", limit, err)
		}
		if body.read != limit+1 {
			t.Errorf("limit %d: read %d bytes, want %d", limit, body.read, limit+1)
		}

		exact := &http.Response{StatusCode: 200, ContentLength: -1,
			Body: io.NopCloser(io.LimitReader(&endless{}, limit))}
		b, err := readBody(exact, limit)
		if err != nil || int64(len(b)) != limit {
			t.Fatalf("limit %d: a body of exactly the limit: %d bytes, %v", limit, len(b), err)
		}
		if int64(cap(b)) > limit+1 {
			t.Errorf("limit %d: a buffer of %d bytes for a body of %d", limit, cap(b), limit)
		}
	}
}
