package storage

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jfastframework/jfast/framework/resilience"
)

// responseError is an error as the SDK returns it once a response with status
// has begun: the operation's error around the response's.
func responseError(status int, err error) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "ListObjectsV2", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err},
	}}
}

// decodeError is what the SDK makes of a body it could not read or decode.
func decodeError(err error) error {
	return &smithy.DeserializationError{Err: fmt.Errorf("failed to decode response body, %w", err)}
}

// progressSince is the progress of an operation that has heard nothing from S3
// since t (which may be before the package's epoch: last is set too).
func progressSince(t time.Time) *progress {
	p := &progress{start: stampAt(t)}
	p.last.Store(stampAt(t))
	return p
}

// The classification of errors after a response began, case by case: an
// answer S3 finished is a success, one whose transfer broke is judged like a
// transport error (a failure, unless its caller cut it: then silentCut).
func TestClassifyBrokenResponses(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel()
	const connect = 5 * time.Second
	now := time.Now()
	silent := progressSince(now.Add(-time.Minute)) // silent for a minute
	busy := progressSince(now)                     // just heard from S3

	gap := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	proxyPage := &xml.SyntaxError{Msg: "unexpected end element </body>", Line: 3}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		pr   *progress
		want resilience.Outcome
	}{
		{"a complete 403 AccessDenied", bg, responseError(403, &smithy.GenericAPIError{Code: "AccessDenied"}), busy, resilience.Success},
		{"a complete 404 NoSuchBucket", bg, responseError(404, &smithy.GenericAPIError{Code: "NoSuchBucket"}), busy, resilience.Success},
		{"a complete 403 that is not XML (a proxy's page)", bg, responseError(403, decodeError(proxyPage)), busy, resilience.Success},
		{"a complete 503", bg, responseError(503, &smithy.GenericAPIError{Code: "SlowDown"}), busy, resilience.Failure},
		{"a 200 body cut by the read gap", bg, responseError(200, decodeError(gap)), busy, resilience.Failure},
		{"a 200 body reset", bg, responseError(200, decodeError(reset)), busy, resilience.Failure},
		{"a 200 body closed early", bg, responseError(200, decodeError(io.ErrUnexpectedEOF)), busy, resilience.Failure},
		{"a 404 error body cut by the read gap", bg, responseError(404, decodeError(gap)), busy, resilience.Failure},
		{"a Get body cut by the read gap (downloadBody makes it a Failure)", bg, gap, busy, resilience.Hang},
		{"a Get body reset", bg, reset, busy, resilience.Failure},
		{"a Get body closed early", bg, io.ErrUnexpectedEOF, busy, resilience.Failure},
		{"a 200 body cancelled by its caller after a long silence", cancelled, responseError(200, decodeError(context.Canceled)), silent, resilience.Ignore},
		{"a Get body cancelled by its caller", cancelled, context.Canceled, silent, resilience.Ignore},
		{"a 200 body cut by its caller's deadline after a long silence", expired, responseError(200, decodeError(context.DeadlineExceeded)), silent, resilience.Failure},
		{"a 200 body cut by its caller's deadline right after a byte", expired, responseError(200, decodeError(context.DeadlineExceeded)), busy, resilience.Ignore},
		{"a Get body cut by its caller's deadline after a long silence (downloadBody: a Failure)", expired, context.DeadlineExceeded, silent, resilience.Hang},
		{"a Get body cut by its caller's deadline right after a byte", expired, context.DeadlineExceeded, busy, resilience.Ignore},
		{"an upload body that failed on a reset", bg, &BodyError{Err: reset}, silent, resilience.Ignore},
	} {
		if got := classify(tc.ctx, tc.err, tc.pr, connect); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A read of a Get's body by its caller moves the progress stamp: the time
// between two reads is the caller's.
func TestWaitingStampsTheCallersRead(t *testing.T) {
	t.Parallel()
	p := progressSince(time.Now().Add(-time.Minute))
	if s := p.silence(time.Now()); s < 59*time.Second {
		t.Fatalf("silence before the read = %s, want about a minute", s)
	}
	p.waiting()
	if s := p.silence(time.Now()); s >= time.Second {
		t.Fatalf("silence after the read began = %s, want none to speak of", s)
	}
}

// An upload to a silent S3 may fail with the writer's "use of closed network
// connection" when the reader's gap fired first and the transport closed the
// connection: a hang all the same, since a connection of the operation saw
// its gap expire; the same error without a gap that fired is a failure.
func TestClassifyGapFiredOnAConnection(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	defer server.Close()
	gc := &gapConn{Conn: client, gap: 20 * time.Millisecond}
	defer gc.Close()
	if _, err := gc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a read from a silent peer returned no error")
	}
	if !gc.fired.Load() {
		t.Fatal("the gap expired and the connection did not note it")
	}
	closed := &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}
	bg := context.Background()
	fired := progressSince(time.Now())
	fired.conns = []*gapConn{gc}
	if got := classify(bg, closed, fired, 5*time.Second); got != resilience.Hang {
		t.Fatalf("closed connection after the gap fired: %s, want hang", got)
	}
	quiet := progressSince(time.Now())
	quiet.conns = []*gapConn{{Conn: server, gap: time.Minute}}
	if got := classify(bg, closed, quiet, 5*time.Second); got != resilience.Failure {
		t.Fatalf("closed connection with no gap fired: %s, want failure", got)
	}
}
