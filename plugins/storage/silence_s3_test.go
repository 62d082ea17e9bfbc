package storage_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// The silence rule on a real S3: a handler that makes two operations on a
// paused versitygw (SIGSTOP: connections are accepted, nothing answers) pays
// one operation's bound: its first request, cut by the read gap. That hang,
// with nothing answered since the operation was admitted, opens the breaker
// for a full cool-down although breaker_failures (the default, 5) is far from
// reached, and the policy's loop then makes no retry (attempts = 2 notwithstanding:
// StopOpen), so the handler's second operation is refused with no request: the
// open breaker's 503 naming storage, with Retry-After.
//
// The handler serves an avatar and falls back to a default one on the same
// disk when the first Get fails: each operation's HTTP requests to S3 (the
// policy's attempts) are counted by a trace on its context.
func TestS3PausedHandlerPaysOneOperationsBound(t *testing.T) {
	t.Parallel()
	const (
		readTimeout = 400 * time.Millisecond
		attempts    = 2
	)
	var attemptsOf [2]atomic.Int64 // each Get's requests to S3
	errs := make(chan [2]error, 1) // each Get's error, once the handler is done with them
	srv := privateS3(t)
	s := start(t, s3TOML(srv.Endpoint, srv.newBucket(t),
		`read_timeout = "400ms"`, `connect_timeout = "400ms"`, `attempts = 2`), "files",
		func(d *storage.Disk, r chiRouter) {
			r.Get("/avatar/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				var obj *storage.Object
				var got [2]error
				for i, key := range []string{"avatars/" + chi.URLParam(r, "id"), "avatars/default"} {
					ctx := httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
						GetConn: func(string) { attemptsOf[i].Add(1) },
					})
					obj, got[i] = d.Get(ctx, key)
					if got[i] == nil {
						break
					}
				}
				errs <- got
				if got[1] != nil {
					return got[1]
				}
				defer obj.Close()
				_, err := io.Copy(w, obj)
				return err
			}).ServeHTTP)
		})
	ctx := context.Background()
	for _, key := range []string{"avatars/7", "avatars/default"} {
		if err := s.disk.Put(ctx, key, strings.NewReader(key), "text/plain"); err != nil {
			t.Fatal(err)
		}
	}
	srv.pause(t)
	defer srv.resume(t)

	t0 := time.Now()
	res := s.svc.Get(t, "/avatar/8") // not stored: its Get would fall back if S3 answered
	el := time.Since(t0)

	var got [2]error
	select {
	case got = <-errs: // sent before the handler answered
	default:
		t.Fatalf("the handler did not run: %d %s", res.Status, res.String())
	}
	var de *problem.DependencyError
	if first := got[0]; !errors.As(first, &de) || de.Dependency != "storage" || errors.Is(first, resilience.ErrOpen) {
		t.Fatalf("first Get on a paused S3: %v, want the storage dependency error of its own deadlines", first)
	}
	if got := attemptsOf[0].Load(); got != 1 {
		t.Fatalf("first Get made %d requests to S3, want 1 (its hang opened the breaker: no retry of the %d attempts)", got, attempts)
	}
	// Its own deadline ended it: the attempt waited at least the read gap.
	if el < readTimeout {
		t.Fatalf("the request took %s, less than read_timeout (%s)", el, readTimeout)
	}
	second := got[1]
	if !errors.Is(second, resilience.ErrOpen) || !errors.As(second, &de) || de.Dependency != "storage" {
		t.Fatalf("second Get: %v, want the open breaker's storage dependency error", second)
	}
	if got := attemptsOf[1].Load(); got != 0 {
		t.Fatalf("second Get made %d requests to S3, want none", got)
	}
	snap := s.disk.Breaker().Snapshot()
	if snap.State != resilience.StateOpen || snap.Opens != 1 {
		t.Fatalf("breaker after one hung operation = %+v, want opened once", snap)
	}
	if res.Status != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "15" ||
		!strings.Contains(res.String(), `"dependency":"storage"`) {
		t.Fatalf("response = %d (Retry-After %q) %s, want the open breaker's 503 naming storage, Retry-After 15",
			res.Status, res.Header.Get("Retry-After"), res.String())
	}
	if n := counter(t, s, "jfast_storage_operations_total", "outcome", "circuit_open"); n != 1 {
		t.Fatalf("operations the open breaker refused = %v, want the second Get", n)
	}
	t.Logf("a request with two Gets on a paused S3 took %s (one Get's bound: one attempt of 9/8 × %s)", el, readTimeout)
}
