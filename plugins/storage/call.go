package storage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/jfastframework/jfast/framework/resilience"
)

// request is one S3 request of an operation, as the disk's policy runs it:
// each is a call of the policy's loop (throttle, breaker, bulkhead,
// attempts, timeout, backoff, retry budget), whose attempts the AWS SDK
// sends once each (its own retryer is off).
type request struct {
	// body is the request's body (a Put's, a part's), nil for none. It is
	// rewound to where it stood before each retry; a body that cannot seek
	// is sent once.
	body watched
	// hold keeps a Get's call open when it succeeds: *hold is then the
	// downloadBody that ends it when the body is done.
	hold **downloadBody
}

// requester runs one request of an operation under the disk's policy; the
// s3 driver calls it for each request a multipart upload makes.
type requester func(ctx context.Context, rq request, fn func(context.Context) error) error

// request runs fn as one S3 request through the disk's policy; a local
// disk, which has none, runs it once. The error is fn's last, or the
// policy's refusal (*resilience.OpenError, *resilience.BulkheadFullError,
// *resilience.ThrottledError).
func (d *Disk) request(ctx context.Context, rq request, fn func(context.Context) error) error {
	if d.policy == nil {
		return fn(ctx)
	}
	// The Run is apart from the attempt: a Get's heldCall keeps it, and
	// must not keep the attempt, whose fn holds the Get's result (and so
	// the body the cleanup below waits to see collected).
	a := &attempt{d: d, fn: fn, body: rq.body, run: new(resilience.Run)}
	opts := resilience.RunOpts{OpenEnded: rq.body != nil || rq.hold != nil}
	if rq.body != nil {
		if s, ok := rq.body.(io.Seeker); ok {
			if at, err := s.Seek(0, io.SeekCurrent); err == nil {
				a.seeker, a.from = s, at
			}
		}
		if a.seeker == nil {
			opts.Attempts = 1 // nothing to send again
		}
	}
	r := a.run
	if err := d.policy.Begin(ctx, r, opts); err != nil {
		return err
	}
	v := r.Attempts(a)
	if rq.hold != nil && v.Err == nil {
		// The headers are in: the body is bounded by the read gap and the
		// caller, and the call ends with it (downloadBody.settle).
		r.EndTimeout()
		call := &heldCall{run: r}
		held := &downloadBody{ctx: ctx, pr: a.pr, connect: d.connect, call: call}
		if r.Probe() {
			r.Settle(resilience.Success) // a failure of the body since counts on its own (Run.EndTransfer)
		}
		// A body dropped without Close gives its place back when it is
		// collected, as no evidence (and cancels its request).
		runtime.AddCleanup(held, func(c *heldCall) { c.end(resilience.Ignore) }, call)
		*rq.hold = held
		return nil
	}
	r.End(r.Outcome())
	return v.Err
}

// attempt is a request's resilience.Attempter.
type attempt struct {
	d      *Disk
	run    *resilience.Run
	fn     func(context.Context) error
	body   watched
	seeker io.Seeker // body, when it can be rewound
	from   int64     // where seeker stood before the first attempt
	pr     *progress // the last attempt's
}

func (a *attempt) Attempt(ctx context.Context, n int) resilience.Verdict {
	if n > 1 && a.seeker != nil {
		if _, err := a.seeker.Seek(a.from, io.SeekStart); err != nil {
			return resilience.Verdict{Err: &BodyError{Err: err}, Outcome: resilience.Ignore}
		}
	}
	opCtx, pr := track(ctx, time.Now())
	a.pr = pr
	if a.body != nil {
		// S3 began reading the body: what follows is a transfer, bounded
		// by the read gap, and the call's timeout ends.
		pr.onMove = a.run.EndTimeout
		a.body.track(pr)
	}
	err := a.fn(opCtx)
	if rerr := a.bodyFailure(); err != nil && rerr != nil {
		// The body failed (a client that went away mid-upload): the
		// caller's problem, no evidence against the disk.
		err = &BodyError{Err: rerr}
	}
	// Until the body moved, the call's timeout was the disk's own deadline;
	// since, only the read gap (which moves with progress) and the caller.
	own := a.run.Own()
	if pr.moved.Load() {
		own = time.Time{}
	}
	o := judge(a.run.Caller(), own, ctx, err, pr, a.d.connect)
	return resilience.Verdict{Err: err, Outcome: o, Retry: retryable(err), Overloaded: overloaded(err), Judged: true}
}

// overloaded reports whether S3 refused the request for load: a 503 (S3's
// SlowDown) or a 429, or an error code the AWS SDK counts as throttling
// (SlowDown, Throttling, RequestLimitExceeded, …). The adaptive throttle
// (throttle = true) counts such an answer as not accepted, as the http
// plugin counts a 429 or a 503; the breaker still judges it by its outcome.
func overloaded(err error) bool {
	if err == nil {
		return false
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		if s := re.HTTPStatusCode(); s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable {
			return true
		}
	}
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

func (a *attempt) bodyFailure() error {
	if a.body == nil {
		return nil
	}
	return a.body.failure()
}

func (a *attempt) Report(resilience.AttemptRecord) {}

// retryable reports whether another attempt of a request that failed with
// err could succeed, by the AWS SDK's own rules (connection errors,
// timeouts, throttling codes, 500, 502, 503, 504): the loop still checks
// attempts, the deadline, the throttle and the budget. A missing object, a
// refused key, a failing body and every other answer are final.
func retryable(err error) bool {
	switch {
	case err == nil, errors.Is(err, ErrNotExist), errors.Is(err, ErrInvalidKey), errors.Is(err, ErrConflict),
		errors.As(err, new(*BodyError)):
		return false
	}
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}
