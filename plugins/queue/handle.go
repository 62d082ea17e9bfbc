package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/jfastframework/jfast/requestid"
)

// handler runs one kind's jobs from its raw payload.
type handler func(ctx context.Context, payload json.RawMessage) error

// Handle registers fn as the handler of kind. The payload is decoded from JSON
// into a T, so the type the enqueuing side passes and T must agree on their JSON
// form. Register every handler at boot: before the App starts (on the plugin
// given to framework.Options) or in the Routes function; workers start once the
// App has started and a registration after that is refused.
//
//	queue.Handle(q, "send_receipt", func(ctx context.Context, r Receipt) error {
//		return mailer.Send(ctx, r.Email, ...)
//	})
func Handle[T any](q *Plugin, kind string, fn func(context.Context, T) error) error {
	if fn == nil {
		return fmt.Errorf("queue: handler for %q is nil", kind)
	}
	return q.register(kind, func(ctx context.Context, raw json.RawMessage) error {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			// The payload will not decode on the next attempt either.
			return Permanent(fmt.Errorf("decode %s payload into %T: %w", kind, v, err))
		}
		return fn(ctx, v)
	})
}

func (p *Plugin) register(kind string, h handler) error {
	if !validKind(kind) {
		return kindError(kind)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workersStarted {
		return fmt.Errorf("queue: handler for %q registered after the workers started; register handlers at boot (before the App starts or in Routes)", kind)
	}
	if _, dup := p.handlers[kind]; dup {
		return fmt.Errorf("queue: a handler for %q is already registered", kind)
	}
	p.handlers[kind] = h
	return nil
}

// interruptedError is an attempt cancelled by shutdown: not the job's fault.
type interruptedError struct{ err error }

func (e *interruptedError) Error() string {
	return "interrupted by shutdown: " + e.err.Error()
}
func (e *interruptedError) Unwrap() error { return e.err }

// IsInterrupted reports whether an attempt was cancelled by the worker's
// shutdown; backends redeliver it without counting the attempt.
func IsInterrupted(err error) bool {
	var i *interruptedError
	return errors.As(err, &i)
}

type unknownKindError struct{ kind string }

func (e *unknownKindError) Error() string {
	return fmt.Sprintf("no handler for job kind %q in this process", e.kind)
}

// IsUnknownKind reports whether an attempt found no handler for its kind in
// the process that fetched it (an older replica during a rolling deploy, or a
// kind no worker registers). It is a failed attempt like any other: retried
// with the backoff, so a replica that has the handler can take it, and dead
// once its attempts are spent, so a kind nobody handles does not circulate forever.
func IsUnknownKind(err error) bool {
	var u *unknownKindError
	return errors.As(err, &u)
}

// TimeoutError is a failed attempt that ran past its job timeout.
type TimeoutError struct {
	Kind    string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("job %s exceeded its timeout of %s", e.Kind, e.Timeout)
}

// Is makes errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// executor is the plugin's Executor.
type executor struct{ p *Plugin }

// Execute implements Executor.
func (x executor) Execute(ctx context.Context, d Delivery) (err error) {
	p := x.p
	start := time.Now()
	h := p.handler(d.Kind)
	if h == nil {
		p.metrics.observe(d.Kind, "unknown_kind", 0)
		p.log.WarnContext(ctx, "job of a kind no handler is registered for in this process; the attempt counts as failed", slog.String("kind", d.Kind), slog.String("job_id", d.ID),
			slog.String("queue", d.Queue), slog.Int("attempt", d.Attempt), slog.Int("max_attempts", d.MaxAttempts))
		return &unknownKindError{kind: d.Kind}
	}
	var env envelope
	if uerr := json.Unmarshal(d.Envelope, &env); uerr != nil {
		return Permanent(fmt.Errorf("decode job envelope: %w", uerr))
	}
	timeout := p.cfg.JobTimeout
	if env.TimeoutMS > 0 {
		timeout = min(timeout, time.Duration(env.TimeoutMS)*time.Millisecond)
	}
	info := &Info{ID: d.ID, Kind: d.Kind, Queue: d.Queue, Attempt: d.Attempt, MaxAttempts: d.MaxAttempts, RequestID: env.RequestID, Metadata: env.Metadata}
	jctx := context.WithValue(ctx, infoKey{}, info)
	if env.RequestID != "" {
		jctx = requestid.NewContext(jctx, env.RequestID)
	}
	ends := &attemptEnds{}
	jctx = context.WithValue(jctx, attemptEndsKey{}, ends)
	for _, extract := range p.extractors() {
		jctx = extract(jctx, env.Metadata)
	}
	defer func() { ends.end(err) }() // runs after the deferred recovery below has set err
	jctx, cancel := context.WithTimeoutCause(jctx, timeout, &TimeoutError{Kind: d.Kind, Timeout: timeout})
	defer cancel()

	defer func() {
		if r := recover(); r != nil {
			p.log.ErrorContext(jctx, "job panicked", slog.String("kind", d.Kind), slog.String("job_id", d.ID), slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("job %s panicked: %v", d.Kind, r)
		}
		outcome := "done"
		switch {
		case err == nil:
		case IsPermanent(err):
			outcome = "permanent"
		case IsInterrupted(err):
			outcome = "interrupted"
		default:
			outcome = "failed"
		}
		p.metrics.observe(d.Kind, outcome, time.Since(start))
		if err != nil {
			p.log.WarnContext(jctx, "job attempt failed", slog.String("kind", d.Kind), slog.String("job_id", d.ID), slog.String("queue", d.Queue),
				slog.Int("attempt", d.Attempt), slog.Int("max_attempts", d.MaxAttempts), slog.String("outcome", outcome), slog.String("error", err.Error()))
		}
	}()

	err = h(jctx, env.Payload)
	if err == nil {
		return nil
	}
	if IsPermanent(err) {
		return err
	}
	// Why the context ended decides what the error means: the job's own
	// timeout is a failed attempt; the worker's shutdown is an interruption.
	if cause := context.Cause(jctx); jctx.Err() != nil {
		var te *TimeoutError
		if errors.As(cause, &te) && ctx.Err() == nil {
			return fmt.Errorf("%w: %w", te, err)
		}
		if ctx.Err() != nil && p.stopping.Load() {
			return &interruptedError{err: err}
		}
	}
	return err
}

func (p *Plugin) handler(kind string) handler {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handlers[kind]
}

// retryDelay is the delay before the attempt after attempt (1-based) failed with
// err: the handler's RetryAfter when it asked for one, else full-jitter
// exponential backoff from retry_base capped at retry_max.
func (p *Plugin) retryDelay(attempt int, err error) time.Duration {
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after
	}
	if IsInterrupted(err) {
		return 0
	}
	return p.backoff.Delay(attempt)
}
