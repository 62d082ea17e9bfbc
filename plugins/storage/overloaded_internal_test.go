package storage

import (
	"errors"
	"net"
	"os"
	"testing"

	"github.com/aws/smithy-go"
)

// S3's refusals for load are overloaded (the adaptive throttle counts them as
// not accepted); every other answer and transport error is not.
func TestOverloaded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"503 SlowDown", responseError(503, &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."}), true},
		{"503 without a code", responseError(503, errors.New("service unavailable")), true},
		{"429", responseError(429, errors.New("too many requests")), true},
		{"throttling code on a 400", responseError(400, &smithy.GenericAPIError{Code: "Throttling"}), true},
		{"500 InternalError", responseError(500, &smithy.GenericAPIError{Code: "InternalError"}), false},
		{"502", responseError(502, errors.New("bad gateway")), false},
		{"404 NoSuchKey", responseError(404, &smithy.GenericAPIError{Code: "NoSuchKey"}), false},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, false},
		{"nil", nil, false},
	} {
		if got := overloaded(c.err); got != c.want {
			t.Errorf("%s: overloaded = %v, want %v", c.name, got, c.want)
		}
	}
}
