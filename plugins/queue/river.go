package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/jfastframework/jfast/framework/resilience"
)

// riverBackend is the postgres backend, on River (github.com/riverqueue/river):
// jobs are rows fetched with FOR UPDATE SKIP LOCKED, inserts are announced with
// LISTEN/NOTIFY, a job whose worker vanished is rescued after rescue_after.
// It shares the db plugin's pool.
type riverBackend struct {
	env    BackendEnv
	pool   *pgxpool.Pool
	insert *river.Client[pgx.Tx]

	migrateMu chan struct{} // a lock that honours the caller's context
	migrated  bool

	// next holds the delay a failed attempt asked for, read by the retry
	// policy right after the attempt (same process, same job ID).
	next sync.Map // int64 → time.Duration

	mu      sync.Mutex
	worker  *river.Client[pgx.Tx]
	cancel  context.CancelFunc // stops the start loop
	loop    chan struct{}      // closed when the start loop ended
	running bool               // the worker client started
}

// riverArgs is every jfast job's River args: the plugin's envelope and the
// unique key, the only field River's ByArgs uniqueness looks at.
type riverArgs struct {
	kind      string
	Job       json.RawMessage `json:"job"`
	UniqueKey string          `json:"unique_key,omitempty" river:"unique"`
}

func (a riverArgs) Kind() string { return a.kind }

// logger is the plugin's logger for River, with the backend named; config
// wraps its handler in levelHandler, so River's own logs go out at warning
// and above.
func (b *riverBackend) logger() *slog.Logger {
	if l, ok := b.env.Logger.(*slog.Logger); ok {
		return l.With(slog.String("backend", "river"))
	}
	return slog.Default()
}

func (b *riverBackend) Open(_ context.Context, env BackendEnv) error {
	pool, ok := env.Shared.(*pgxpool.Pool)
	if !ok {
		return fmt.Errorf("postgres backend needs a *pgxpool.Pool, got %T", env.Shared)
	}
	b.env, b.pool = env, pool
	c, err := river.NewClient(riverpgxv5.New(pool), b.config(nil))
	if err != nil {
		return fmt.Errorf("river client: %w", err)
	}
	b.insert = c
	b.migrateMu = make(chan struct{}, 1)
	return nil
}

func (b *riverBackend) config(workers *river.Workers) *river.Config {
	cfg := b.env.Config
	rc := &river.Config{
		Schema:                      cfg.Schema,
		Logger:                      slog.New(levelHandler{b.logger().Handler(), slog.LevelWarn}),
		SkipUnknownJobCheck:         true, // kinds may be handled by another service
		MaxAttempts:                 cfg.MaxAttempts,
		JobTimeout:                  cfg.JobTimeout + time.Second, // see riverWorker.Timeout
		RescueStuckJobsAfter:        cfg.RescueAfter,
		RetryPolicy:                 riverRetryPolicy{b},
		DiscardedJobRetentionPeriod: cfg.DeadRetention,
		CancelledJobRetentionPeriod: cfg.DeadRetention,
		FetchPollInterval:           cfg.PollInterval,
		// River refuses a cooldown longer than the poll interval.
		FetchCooldown: min(river.FetchCooldownDefault, cfg.PollInterval),
		Hooks:         []rivertype.Hook{river.HookInsertBeginFunc(insertDelayedAvailable)},
		// FetchOnlyKnownKinds stays false: a job of a kind this process has
		// no handler for is fetched and fails with River's
		// UnknownJobKindError, a counted attempt, dead once its attempts are spent
		// like any failing job (see IsUnknownKind); left unfetched, a kind
		// no worker registers would stay available forever.
	}
	if workers != nil {
		rc.Workers = workers
		rc.Queues = map[string]river.QueueConfig{}
		for _, name := range b.env.Queues {
			rc.Queues[name] = river.QueueConfig{MaxWorkers: cfg.Queues[name].Concurrency}
		}
	}
	return rc
}

// insertDelayedAvailable stores a delayed job as available, not scheduled:
// River's fetch takes only available jobs whose scheduled_at has passed, so
// the job is fetched by the first poll of a worker after its due time (within
// poll_interval), where a scheduled one waits for River's scheduler to make it
// available, which runs every 5 s on the leader only (an interval River does
// not let a client set). River does the same with its own short retries and
// snoozes. The state is otherwise the same to jfast: depth counts both and
// unique keys hold in both.
func insertDelayedAvailable(_ context.Context, params *rivertype.JobInsertParams) error {
	if params.State == rivertype.JobStateScheduled {
		params.State = rivertype.JobStateAvailable
	}
	return nil
}

// ensureMigrated applies River's migrations in the configured schema once per
// process, under an advisory lock so replicas starting together do not race.
// A caller waiting for a migration in progress gives up with its context (a
// /ready check does not outlive readiness_timeout).
func (b *riverBackend) ensureMigrated(ctx context.Context) error {
	select {
	case b.migrateMu <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("migrate job tables: waiting for the migration in progress: %w", ctx.Err())
	}
	defer func() { <-b.migrateMu }()
	if b.migrated {
		return nil
	}
	// River's migrations cannot all run in one transaction (one adds an enum
	// value that a later one uses), so the lock is a session advisory lock on
	// a connection of its own, held while the migrator runs on the pool.
	conn, err := b.acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate job tables: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7242017901)"); err != nil {
		return fmt.Errorf("migrate job tables: lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock(7242017901)"); err != nil {
			// The session may still hold the lock: do not return it to the pool.
			_ = conn.Conn().Close(uctx)
		}
	}()
	if s := b.env.Config.Schema; s != "" {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s}.Sanitize()); err != nil {
			return fmt.Errorf("migrate job tables: create schema %s: %w", s, err)
		}
	}
	m, err := rivermigrate.New(riverpgxv5.New(b.pool), &rivermigrate.Config{Schema: b.env.Config.Schema, Logger: slog.New(levelHandler{b.logger().Handler(), slog.LevelWarn})})
	if err != nil {
		return fmt.Errorf("migrate job tables: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate job tables: %w", err)
	}
	b.migrated = true
	return nil
}

var riverPendingStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}

func (b *riverBackend) args(m *Message) (riverArgs, *river.InsertOpts) {
	opts := &river.InsertOpts{Queue: m.Queue, MaxAttempts: m.MaxAttempts, ScheduledAt: m.RunAt}
	if m.UniqueKey != "" {
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByState: riverPendingStates}
	}
	return riverArgs{kind: m.Kind, Job: m.Envelope, UniqueKey: m.UniqueKey}, opts
}

func riverResult(r *rivertype.JobInsertResult) Result {
	return Result{ID: strconv.FormatInt(r.Job.ID, 10), Queue: r.Job.Queue, Duplicate: r.UniqueSkippedAsDuplicate}
}

// acquire takes a connection through the db plugin's breaker and bounded
// ping when the plugin offers them (BackendEnv.Acquire), else from the pool.
func (b *riverBackend) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if b.env.Acquire != nil {
		return b.env.Acquire(ctx)
	}
	return b.pool.Acquire(ctx)
}

// Enqueue inserts the job in a transaction of its own on a connection taken
// through the db plugin's breaker: while that breaker is open it fails at
// once, with the db plugin's error. River's Insert would do the same
// BEGIN, INSERT, COMMIT on a connection taken from the pool directly.
//
// Only a COMMIT whose answer was lost leaves the outcome unknown: every
// failure before it leaves nothing committed.
func (b *riverBackend) Enqueue(ctx context.Context, m *Message) (Result, error) {
	if err := b.ensureMigrated(ctx); err != nil {
		return Result{}, notEnqueued(err)
	}
	conn, err := b.acquire(ctx)
	if err != nil {
		return Result{}, notEnqueued(err)
	}
	// A connection left in a transaction or broken is destroyed, not
	// pooled (pgxpool checks on Release): the server rolls back.
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return Result{}, notEnqueued(fmt.Errorf("begin: %w", err))
	}
	a, opts := b.args(m)
	r, err := b.insert.InsertTx(ctx, tx, a, opts)
	if err != nil {
		if ctx.Err() == nil {
			_ = tx.Rollback(ctx)
		}
		return Result{}, notEnqueued(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, commitOutcome(fmt.Errorf("commit: %w", err))
	}
	return riverResult(r), nil
}

// commitOutcome marks the error of a COMMIT: the server's answer (an error,
// or a rollback) or a COMMIT that was never sent mean nothing was stored;
// anything else (the answer lost to the deadline or a broken connection)
// means the job may have been.
func commitOutcome(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) || errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
		return notEnqueued(err)
	}
	return maybeEnqueued(err)
}

func (b *riverBackend) EnqueueTx(ctx context.Context, tx pgx.Tx, m *Message) (Result, error) {
	if err := b.ensureMigrated(ctx); err != nil {
		return Result{}, notEnqueued(err)
	}
	a, opts := b.args(m)
	r, err := b.insert.InsertTx(ctx, tx, a, opts)
	if err != nil {
		return Result{}, notEnqueued(err)
	}
	return riverResult(r), nil
}

// riverWorker runs every kind through the plugin's executor.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	b    *riverBackend
	exec Executor
}

// Timeout is River's own bound, a second after the executor's job_timeout so
// the recorded error is the executor's. It must be positive: River's rescuer
// never rescues a job whose worker has no timeout.
func (w *riverWorker) Timeout(*river.Job[riverArgs]) time.Duration {
	return w.b.env.Config.JobTimeout + time.Second
}

func (w *riverWorker) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	err := w.exec.Execute(ctx, Delivery{
		ID: strconv.FormatInt(job.ID, 10), Kind: job.Kind, Queue: job.Queue,
		Envelope: job.Args.Job, Attempt: job.Attempt, MaxAttempts: job.MaxAttempts,
	})
	switch {
	case err == nil:
		return nil
	case IsPermanent(err):
		return river.JobCancel(err) // straight to the dead letter
	case IsInterrupted(err):
		return river.JobSnooze(0) // not the job's fault: run again, attempt not counted
	}
	w.b.next.Store(job.ID, w.b.env.Retry(job.Attempt, err))
	return err
}

// riverRetryPolicy hands River the plugin's retry delays.
type riverRetryPolicy struct{ b *riverBackend }

func (p riverRetryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	if d, ok := p.b.next.LoadAndDelete(job.ID); ok {
		return time.Now().Add(d.(time.Duration))
	}
	// A rescued job (its worker vanished): the ordinary backoff.
	return time.Now().Add(p.b.env.Retry(job.Attempt, errors.New("rescued")))
}

func (b *riverBackend) StartWorkers(_ context.Context, exec Executor, kinds []string) error {
	if len(kinds) == 0 {
		return nil
	}
	workers := river.NewWorkers()
	for _, k := range kinds {
		if err := safeAddWorker(workers, k, &riverWorker{b: b, exec: exec}); err != nil {
			return err
		}
	}
	c, err := river.NewClient(riverpgxv5.New(b.pool), b.config(workers))
	if err != nil {
		return fmt.Errorf("river worker client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.mu.Lock()
	b.worker, b.cancel, b.loop = c, cancel, make(chan struct{})
	b.mu.Unlock()
	go b.startLoop(ctx, c)
	return nil
}

// startLoop starts the worker client, backing off while the database is down.
func (b *riverBackend) startLoop(ctx context.Context, c *river.Client[pgx.Tx]) {
	defer close(b.loop)
	backoff := resilience.Backoff{Base: 500 * time.Millisecond, Max: 15 * time.Second}
	for attempt := 1; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := b.ensureMigrated(sctx)
		if err == nil {
			// River's Start keeps its own goroutines on a context of its own
			// making (Stop ends them), so the start bound is only for set-up.
			err = c.Start(context.WithoutCancel(sctx))
		}
		cancel()
		if err == nil {
			b.mu.Lock()
			b.running = true
			b.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		b.env.Logger.Warn("queue workers cannot start yet; retrying", slog.String("error", err.Error()), slog.Int("attempt", attempt))
		t := time.NewTimer(backoff.Delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// WorkersStarted reports whether the worker client started (startLoop
// retries while the database is down): the plugin's /ready says "starting"
// until then.
func (b *riverBackend) WorkersStarted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}

func safeAddWorker(workers *river.Workers, kind string, w *riverWorker) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("register worker for %s: %v", kind, r)
		}
	}()
	river.AddWorkerArgs(workers, riverArgs{kind: kind}, river.Worker[riverArgs](w))
	return nil
}

func (b *riverBackend) StopWorkers(ctx context.Context) error {
	b.mu.Lock()
	c, cancel, loop := b.worker, b.cancel, b.loop
	b.mu.Unlock()
	if c == nil {
		return nil
	}
	cancel()
	<-loop
	b.mu.Lock()
	running := b.running
	b.running = false
	b.mu.Unlock()
	if !running {
		return nil
	}
	// Soft stop until shortly before ctx's deadline, then cancel what still
	// runs and give the completer a moment to record the interruptions.
	soft, softCancel := drainContext(ctx)
	err := c.Stop(soft)
	softCancel()
	if err == nil {
		return nil
	}
	hard, hardCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer hardCancel()
	if err := c.StopAndCancel(hard); err != nil {
		return fmt.Errorf("river stop: %w", err)
	}
	return nil
}

// drainContext is ctx shortened by a tenth of its remaining time (at most 1 s),
// kept for cancelling the jobs still running when the drain ends.
func drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(time.Until(dl)/10, time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}

var riverDeadStates = []rivertype.JobState{rivertype.JobStateDiscarded, rivertype.JobStateCancelled}

func (b *riverBackend) Dead(ctx context.Context, q DeadQuery) ([]DeadJob, error) {
	if err := b.ensureMigrated(ctx); err != nil {
		return nil, err
	}
	queues := b.env.Queues
	if q.Queue != "" {
		queues = []string{q.Queue}
	}
	params := river.NewJobListParams().States(riverDeadStates...).Queues(queues...).
		OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderDesc).First(q.Limit)
	// On a connection taken through the db plugin's breaker, so that /ready
	// (the mail plugin counts its dead letter) answers at once while it is
	// open instead of waiting on a server that does not answer.
	conn, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	res, err := b.insert.JobListTx(ctx, tx, params)
	if err != nil {
		return nil, err
	}
	out := make([]DeadJob, 0, len(res.Jobs))
	for _, j := range res.Jobs {
		out = append(out, riverDead(j))
	}
	return out, nil
}

// CountDead counts in the database: the payloads stay there (the rows are
// ordered and filtered on finalized_at and kind, never reading args).
func (b *riverBackend) CountDead(ctx context.Context, kind string, limit int) (int, error) {
	if err := b.ensureMigrated(ctx); err != nil {
		return 0, err
	}
	table := "river_job"
	if s := b.env.Config.Schema; s != "" {
		table = pgx.Identifier{s, "river_job"}.Sanitize()
	}
	// Through the db plugin's breaker, as Dead.
	conn, err := b.acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT kind FROM `+table+` WHERE state IN ('discarded','cancelled') AND queue = ANY($1)
		ORDER BY finalized_at DESC LIMIT $2) AS newest
		WHERE kind = $3`, b.env.Queues, limit, kind).Scan(&n)
	return n, err
}

func riverDead(j *rivertype.JobRow) DeadJob {
	d := DeadJob{ID: strconv.FormatInt(j.ID, 10), Kind: j.Kind, Queue: j.Queue, Attempts: j.Attempt}
	var a riverArgs
	if json.Unmarshal(j.EncodedArgs, &a) == nil {
		var env envelope
		if json.Unmarshal(a.Job, &env) == nil {
			d.Payload, d.RequestID = env.Payload, env.RequestID
		}
	}
	if n := len(j.Errors); n > 0 {
		// River prefixes the cause of a cancel with the error's type.
		d.LastError = strings.TrimPrefix(j.Errors[n-1].Error, "JobCancelError: ")
	}
	if j.FinalizedAt != nil {
		d.DiedAt = *j.FinalizedAt
	}
	return d
}

// deadJob returns the job when id names a dead one.
func (b *riverBackend) deadJob(ctx context.Context, id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0, ErrNotFound
	}
	if err := b.ensureMigrated(ctx); err != nil {
		return 0, err
	}
	j, err := b.insert.JobGet(ctx, n)
	if errors.Is(err, river.ErrNotFound) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	if j.State != rivertype.JobStateDiscarded && j.State != rivertype.JobStateCancelled {
		return 0, ErrNotFound
	}
	return n, nil
}

func (b *riverBackend) RetryDead(ctx context.Context, id string) error {
	n, err := b.deadJob(ctx, id)
	if err != nil {
		return err
	}
	_, err = b.insert.JobRetry(ctx, n)
	// The key of a unique job is free while it is dead (River's unique
	// states are the pending ones), so a new job may hold it: River's
	// unique index then refuses the row's return to available, and the
	// job stays dead.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "river_job_unique_idx" { // unique_violation
		return fmt.Errorf("queue: retry dead job %s: %w", id, errUniqueKeyHeld)
	}
	return err
}

func (b *riverBackend) DeleteDead(ctx context.Context, id string) error {
	n, err := b.deadJob(ctx, id)
	if err != nil {
		return err
	}
	_, err = b.insert.JobDelete(ctx, n)
	if errors.Is(err, river.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

func (b *riverBackend) Stats(ctx context.Context) (Stats, error) {
	if err := b.ensureMigrated(ctx); err != nil {
		return Stats{}, err
	}
	table := "river_job"
	if s := b.env.Config.Schema; s != "" {
		table = pgx.Identifier{s, "river_job"}.Sanitize()
	}
	// Through the db plugin's breaker: /ready answers at once while it is open.
	conn, err := b.acquire(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, `SELECT queue, state::text, count(*) FROM `+table+`
		WHERE queue = ANY($1) AND state IN ('available','scheduled','retryable','discarded','cancelled')
		GROUP BY 1, 2`, b.env.Queues)
	if err != nil {
		return Stats{}, err
	}
	defer rows.Close()
	st := Stats{Depth: map[string]int64{}}
	for _, q := range b.env.Queues {
		st.Depth[q] = 0
	}
	for rows.Next() {
		var q, state string
		var n int64
		if err := rows.Scan(&q, &state, &n); err != nil {
			return Stats{}, err
		}
		if state == "discarded" || state == "cancelled" {
			st.Dead += n
		} else {
			st.Depth[q] += n
		}
	}
	return st, rows.Err()
}

func (b *riverBackend) Close(context.Context) error { return nil }

// levelHandler drops records below a level (River logs every job at info).
type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}
func (h levelHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(a), h.min}
}
func (h levelHandler) WithGroup(n string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(n), h.min}
}

var _ deadCounter = (*riverBackend)(nil)
