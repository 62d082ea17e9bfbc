package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Option changes one Enqueue.
type Option func(*options)

type options struct {
	queue       string
	runAt       time.Time
	delay       time.Duration
	maxAttempts int
	uniqueKey   string
	timeout     time.Duration
}

// Queue sends the job to the named queue instead of the default one.
func Queue(name string) Option { return func(o *options) { o.queue = name } }

// Delay makes the job due d from now.
func Delay(d time.Duration) Option { return func(o *options) { o.delay = d; o.runAt = time.Time{} } }

// RunAt makes the job due at t.
func RunAt(t time.Time) Option { return func(o *options) { o.runAt = t; o.delay = 0 } }

// MaxAttempts overrides the queue's attempts key for this job.
func MaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = n } }

// UniqueKey deduplicates the job while another job of the same kind with the same
// key is pending (scheduled, available, running or waiting to retry): the second
// Enqueue inserts nothing and returns the first job's ID with Duplicate set.
func UniqueKey(key string) Option { return func(o *options) { o.uniqueKey = key } }

// Timeout shortens job_timeout for this job. A timeout above job_timeout is
// refused: the rescue of abandoned jobs (rescue_after) is sized on job_timeout,
// and a longer attempt would be handed to a second worker while still running.
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Result is what an Enqueue did.
type Result struct {
	// ID identifies the job in the backend (and in the dead-letter API).
	ID string
	// Queue is the queue the job went to.
	Queue string
	// Duplicate reports that a pending job with the same kind and unique key
	// already existed: nothing was inserted and ID is the existing job's.
	Duplicate bool
}

// Message is one job as the plugin hands it to a [Backend] to store.
type Message struct {
	Kind  string
	Queue string
	// Envelope is the stored body: the payload, the request ID, the metadata
	// and the timeout, encoded by the plugin. Backends store it as is.
	Envelope    []byte
	RunAt       time.Time // zero: now
	MaxAttempts int
	UniqueKey   string
	// Timeout is the attempt's bound, for backends that enforce one too.
	Timeout time.Duration
}

// Delivery is one attempt of a job, as a backend hands it to the plugin.
type Delivery struct {
	ID          string
	Kind        string
	Queue       string
	Envelope    []byte
	Attempt     int // 1 for the first attempt
	MaxAttempts int
}

// envelope is what a job carries besides its kind: the payload and the context
// of the request that enqueued it.
type envelope struct {
	Payload   json.RawMessage   `json:"payload"`
	RequestID string            `json:"request_id,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
}

// Info describes the job a handler is running; get it with [JobFromContext].
type Info struct {
	ID          string
	Kind        string
	Queue       string
	Attempt     int
	MaxAttempts int
	RequestID   string
	// Metadata is what the enqueuing side's metadata hooks stored (trace context).
	Metadata map[string]string
}

type infoKey struct{}

// JobFromContext returns the running job's Info, or false outside a job.
func JobFromContext(ctx context.Context) (Info, bool) {
	i, ok := ctx.Value(infoKey{}).(*Info)
	if !ok {
		return Info{}, false
	}
	return *i, true
}

// DeadJob is a job in the dead letter: it failed as many times as attempts allows, returned a
// [Permanent] error, or was abandoned on its last attempt.
type DeadJob struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Queue     string          `json:"queue"`
	Payload   json.RawMessage `json:"payload"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error"`
	RequestID string          `json:"request_id,omitempty"`
	DiedAt    time.Time       `json:"died_at"`
}

// DeadQuery selects dead jobs.
type DeadQuery struct {
	// Queue limits the list to one queue; empty means every configured queue.
	Queue string
	// Limit caps the list. Defaults to 100.
	Limit int
}

// Stats is a backend's view of its queues, for /ready.
type Stats struct {
	// Depth is how many jobs wait (available, scheduled, retrying) per queue.
	Depth map[string]int64
	// Dead is how many jobs are in the dead letter, over the configured queues.
	Dead int64
}

// ErrNotFound is returned by the dead-letter API for an ID that is not a dead job.
var ErrNotFound = errors.New("queue: no dead job with this id")

// permanentError marks a handler error that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the job is not retried: it goes straight to the dead
// letter, with err as its last error.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err (or an error it wraps) came from [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError asks for the next attempt after a given delay.
type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.after, e.err)
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter returns the wait the job asked for, for the resilience package's
// RetryAfterError interface.
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// RetryAfter wraps err so the next attempt runs after d instead of the backoff's
// delay. The attempt still counts: once attempts are spent the job is dead.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{after: max(d, 0), err: err}
}
