package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Backend stores and delivers jobs. The plugin does everything that is the same
// on every broker (payload encoding, the request ID and metadata, the enqueue
// deadline and breaker, the job timeout, error classification, retry delays,
// metrics); a backend maps these onto one broker. A new backend (RabbitMQ, #9)
// implements this interface, adds itself to the plugin's factory table, and must
// pass the conformance suite in package queuetest.
//
// Every method is bounded by its ctx. Methods other than Open must not be called
// before Open returned nil.
type Backend interface {
	// Open prepares the backend: no I/O that can fail because the broker is
	// down (a down broker must not fail the boot). Migrations and connection
	// set-up that need the broker are done lazily, on first use.
	Open(ctx context.Context, env BackendEnv) error

	// Enqueue stores m and returns its ID. A job with a unique key that is
	// already pending returns the existing job's ID with Duplicate set. An
	// error says whether the job may exist: it matches ErrNotEnqueued only
	// when the job certainly was not stored, and ErrMaybeEnqueued when it
	// was sent and not confirmed; an error that matches neither is taken as
	// ErrMaybeEnqueued.
	Enqueue(ctx context.Context, m *Message) (Result, error)

	// StartWorkers starts fetching from every configured queue with its
	// concurrency, handing each attempt to exec. It returns once fetching is
	// set up; when the broker is down it keeps trying (backing off) in the
	// background and returns nil. kinds are the registered handlers' kinds.
	StartWorkers(ctx context.Context, exec Executor, kinds []string) error

	// StopWorkers stops fetching, waits for the running attempts until ctx is
	// done, then cancels them (they are redelivered: an attempt interrupted by
	// shutdown does not count) and returns.
	StopWorkers(ctx context.Context) error

	// Dead lists dead jobs, newest first.
	Dead(ctx context.Context, q DeadQuery) ([]DeadJob, error)
	// RetryDead makes a dead job available again with a fresh attempt count
	// (postgres) or one more attempt (redis). ErrNotFound when id is not dead.
	RetryDead(ctx context.Context, id string) error
	// DeleteDead removes a dead job. ErrNotFound when id is not dead.
	DeleteDead(ctx context.Context, id string) error

	// Stats reports queue depth and dead-letter count for /ready.
	Stats(ctx context.Context) (Stats, error)

	// Close releases what Open made (never the shared pool or client).
	Close(ctx context.Context) error
}

// TxBackend is a backend that can enqueue inside a caller's PostgreSQL
// transaction: the job exists if and only if the transaction commits.
type TxBackend interface {
	Backend
	EnqueueTx(ctx context.Context, tx pgx.Tx, m *Message) (Result, error)
}

// BackendEnv is what a backend gets from the plugin at Open.
type BackendEnv struct {
	Config Config
	// Queues are the configured queue names, sorted.
	Queues []string
	// Logger logs with the plugin's name.
	Logger Logger
	// Retry computes the delay before the next attempt after a failed one
	// (attempt is the attempt that just failed, 1-based).
	Retry func(attempt int, err error) time.Duration
	// ShutdownTimeout is app.plugin_stop_timeout, the time the plugin's Stop
	// has, for backends that must size their own drain at construction.
	ShutdownTimeout time.Duration
	// Shared is the client the backend uses: *pgxpool.Pool for postgres,
	// redis.UniversalClient for redis (found on the db or cache plugin).
	Shared any
	// Acquire, when set, is how the postgres backend takes the connection of
	// an enqueue: through the db plugin's connection breaker and bounded
	// ping, so an enqueue fails at once while that breaker is open. Nil means
	// Shared's own Acquire.
	Acquire func(ctx context.Context) (*pgxpool.Conn, error)
}

// Logger is the slice of *slog.Logger a backend uses.
type Logger interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// Executor runs one delivery: it decodes the envelope, restores the request ID
// and metadata, applies the job timeout, calls the handler and classifies its
// error. The backend maps the outcome: nil is done; an error with
// [IsPermanent] goes to the dead letter at once; [IsInterrupted] (shutdown
// cancelled the attempt) is redelivered without counting the attempt; any other
// error is a failed attempt, retried after BackendEnv.Retry's delay until
// MaxAttempts, then dead. An unknown kind returns an error for which
// [IsUnknownKind] is true: a failed attempt like any other.
type Executor interface {
	Execute(ctx context.Context, d Delivery) error
}
