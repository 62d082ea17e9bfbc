package queue

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// asynqBackend is the redis backend, on asynq (github.com/hibiken/asynq): a task
// is moved atomically (Lua) from a queue's pending list to its active set with a
// 30 s lease that the worker's heartbeat extends; a task whose lease lapsed is
// recovered by any server of the queue. It shares the cache plugin's client.
//
// asynq has one concurrency for all the queues of a server, so the backend runs
// one asynq server per configured queue, each with that queue's concurrency.
type asynqBackend struct {
	env       BackendEnv
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	opts      asynqOptions

	mu      sync.Mutex
	servers []*asynq.Server
	// hard is cancelled when the drain ends: running handlers' contexts end.
	hard       context.Context
	cancelHard context.CancelFunc
}

// derivesNoContext implements sharedTimerBackend: go-redis derives a context
// from a command's only to dial.
func (b *asynqBackend) derivesNoContext() {}

func (b *asynqBackend) Open(_ context.Context, env BackendEnv) error {
	rdb, ok := env.Shared.(redis.UniversalClient)
	if !ok {
		return fmt.Errorf("redis backend needs a redis.UniversalClient, got %T", env.Shared)
	}
	b.env, b.rdb = env, rdb
	b.opts = newAsynqOptions(env)
	b.client = asynq.NewClientFromRedisClient(scriptRecorder{rdb})
	b.inspector = asynq.NewInspectorFromRedisClient(rdb)
	return nil
}

// asynqOptions are the asynq options of the enqueues that use the defaults,
// made once at Open: an option made per call costs an allocation each.
type asynqOptions struct {
	queues   map[string]asynq.Option // asynq.Queue of each configured queue
	maxRetry asynq.Option            // asynq.MaxRetry(attempts)
	timeout  asynq.Option            // asynq.Timeout(job_timeout + 1s)
}

func newAsynqOptions(env BackendEnv) asynqOptions {
	o := asynqOptions{
		queues:   make(map[string]asynq.Option, len(env.Queues)),
		maxRetry: asynq.MaxRetry(env.Config.MaxAttempts),
		timeout:  asynq.Timeout(env.Config.JobTimeout + time.Second),
	}
	for _, q := range env.Queues {
		o.queues[q] = asynq.Queue(q)
	}
	return o
}

// taskID returns the asynq task ID of m and the Result's ID (queue/task ID).
// A job with a unique key has an ID derived from it: asynq refuses a second
// task with the same ID in the queue. Any other job has a random UUID
// (version 4), drawn from math/rand/v2's generator (ChaCha8, seeded from the
// operating system's randomness in every process): a task ID must be unique
// in its queue, which 122 random bits make as certain as crypto/rand's do,
// and need not be secret (it is no credential: the dead-letter API that
// takes it is the operator's). The ID is written once, as the Result's ID,
// and the task ID is its tail.
func taskID(m *Message) (id, resultID string) {
	if m.UniqueKey != "" {
		id = uniqueTaskID(m.Kind, m.UniqueKey)
		return id, m.Queue + "/" + id
	}
	var u [36]byte
	putUUIDv4(&u, rand.Uint64(), rand.Uint64())
	var b strings.Builder
	b.Grow(len(m.Queue) + 1 + len(u))
	b.WriteString(m.Queue)
	b.WriteByte('/')
	b.Write(u[:])
	resultID = b.String()
	return resultID[len(m.Queue)+1:], resultID
}

// uniqueTaskID is the task ID of a job with a unique key: one per kind and
// key, never the same for two. A kind without a colon is written as
// u:<kind>:<key>, where the first colon after "u:" ends the kind. A kind may
// hold colons (email:send), and then that form would let the kind "a:b"
// with the key "c" and the kind "a" with the key "b:c" share an ID, the
// second job taken for a duplicate of the first: such a kind is written
// after its length instead, as uk<length>:<kind>:<key>.
func uniqueTaskID(kind, key string) string {
	if !strings.Contains(kind, ":") {
		return "u:" + kind + ":" + key
	}
	return "uk" + strconv.Itoa(len(kind)) + ":" + kind + ":" + key
}

// putUUIDv4 writes the random bits hi, lo as a version 4 UUID in its text form
// (xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx, lowercase, as github.com/google/uuid
// writes it).
func putUUIDv4(dst *[36]byte, hi, lo uint64) {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], hi)
	binary.BigEndian.PutUint64(raw[8:], lo)
	raw[6] = raw[6]&0x0f | 0x40 // version 4
	raw[8] = raw[8]&0x3f | 0x80 // variant RFC 9562
	const digits = "0123456789abcdef"
	j := 0
	for i, c := range raw {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j], dst[j+1] = digits[c>>4], digits[c&0x0f]
		j += 2
	}
}

func (b *asynqBackend) Enqueue(ctx context.Context, m *Message) (Result, error) {
	id, resultID := taskID(m)
	queue, ok := b.opts.queues[m.Queue]
	if !ok {
		queue = asynq.Queue(m.Queue)
	}
	// One retry more than the attempts key allows: the handler wrapper sends the
	// last counted failure to the dead letter itself, so an attempt that is
	// not counted (shutdown) never hits asynq's own limit and is
	// archived by mistake.
	maxRetry := b.opts.maxRetry
	if m.MaxAttempts != b.env.Config.MaxAttempts {
		maxRetry = asynq.MaxRetry(m.MaxAttempts)
	}
	// asynq's own deadline backs up the plugin's, a second later, so the
	// recorded error is the plugin's timeout.
	timeout := b.opts.timeout
	if m.Timeout != b.env.Config.JobTimeout {
		timeout = asynq.Timeout(m.Timeout + time.Second)
	}
	opts := [5]asynq.Option{queue, asynq.TaskID(id), maxRetry, timeout}
	n := 4
	if !m.RunAt.IsZero() {
		// asynq keeps due times in whole seconds: round up, never run early.
		opts[n] = asynq.ProcessAt(ceilSecond(m.RunAt))
		n++
	}
	rec := &scriptRecord{Context: ctx}
	_, err := b.client.EnqueueContext(rec, asynq.NewTask(m.Kind, m.Envelope), opts[:n]...)
	if errors.Is(err, asynq.ErrTaskIDConflict) && m.UniqueKey != "" {
		return Result{ID: resultID, Queue: m.Queue, Duplicate: true}, nil
	}
	if err != nil {
		return Result{}, rec.outcome(err)
	}
	return Result{ID: resultID, Queue: m.Queue}, nil
}

// scriptRecorder is the shared client as asynq's Client sees it. A task is
// stored by one Lua script (EVALSHA, or EVAL when Redis lost the script), and
// asynq 0.26 flattens that command's error into text
// (rdb.runScriptWithErrorCode), while whether the task may exist depends on
// how the command failed. So the recorder keeps the script command's own
// error in the Enqueue's context. Every command still goes through the cache
// plugin's hook (breaker, command_timeout).
type scriptRecorder struct{ redis.UniversalClient }

// scriptRecord is the context of one Enqueue's asynq call, which keeps the
// last script command made under it (asynq makes its commands one after the
// other, on the Enqueue's goroutine). The context and the record are one
// allocation.
type scriptRecord struct {
	context.Context
	sent bool  // a script command was made
	err  error // its error, as the shared client returned it
}

type scriptRecordKey struct{}

// Value implements context.Context: the record under scriptRecordKey, the
// Enqueue's context's values under any other key.
func (r *scriptRecord) Value(key any) any {
	if key == (scriptRecordKey{}) {
		return r
	}
	return r.Context.Value(key)
}

func (c scriptRecorder) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	cmd := c.UniversalClient.EvalSha(ctx, sha1, keys, args...)
	record(ctx, cmd.Err())
	return cmd
}

func (c scriptRecorder) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	cmd := c.UniversalClient.Eval(ctx, script, keys, args...)
	record(ctx, cmd.Err())
	return cmd
}

func record(ctx context.Context, err error) {
	if r, ok := ctx.Value(scriptRecordKey{}).(*scriptRecord); ok {
		r.sent, r.err = true, err
	}
}

// outcome marks the error of a failed Enqueue (asynq's):
//
//   - no script command was made (the SADD that registers the queue failed,
//     or an option was refused): not enqueued, asynq's error kept;
//   - the script command succeeded and asynq failed after it: maybe;
//   - the script command failed: its own error, marked by [redisNotSent].
func (r *scriptRecord) outcome(err error) error {
	sent, scriptErr := r.sent, r.err
	switch {
	case !sent:
		return notEnqueued(err)
	case scriptErr == nil:
		return maybeEnqueued(err)
	case redisNotSent(scriptErr):
		return notEnqueued(scriptErr)
	}
	return maybeEnqueued(scriptErr)
}

// redisNotSent reports whether a command's error shows that Redis did not
// run it: Redis answered with an error reply (LOADING, OOM, BUSY ...), a
// breaker refused it, no connection was had (dial failed, pool timeout,
// client closed), or writing it failed (an incomplete command is never run:
// the connection is closed after the error). Anything else, a read that
// timed out or broke after the command was written, is "maybe": Redis may
// have run it, or may run it when it reads its socket again (a paused
// server). A fresh connection whose handshake (HELLO) timed out reads as
// "maybe" too, though the command was never written: the error does not
// tell them apart, and "maybe" cannot lose a job.
func redisNotSent(err error) bool {
	var reply redis.Error
	if errors.As(err, &reply) {
		return true
	}
	if errors.Is(err, resilience.ErrOpen) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "write")
}

func (b *asynqBackend) StartWorkers(_ context.Context, exec Executor, kinds []string) error {
	if len(kinds) == 0 {
		return nil
	}
	cfg := b.env.Config
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hard, b.cancelHard = context.WithCancel(context.Background())
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(b.hard, cancel)
		defer stop()
		id, _ := asynq.GetTaskID(ctx)
		q, _ := asynq.GetQueueName(ctx)
		retried, _ := asynq.GetRetryCount(ctx)
		maxRetry, _ := asynq.GetMaxRetry(ctx)
		attempt, maxAttempts := retried+1, maxRetry // see MaxRetry in Enqueue
		err := exec.Execute(ctx, Delivery{ID: q + "/" + id, Kind: t.Type(), Queue: q, Envelope: t.Payload(), Attempt: attempt, MaxAttempts: maxAttempts})
		switch {
		case err == nil, IsInterrupted(err):
			return err
		case IsPermanent(err), attempt >= maxAttempts:
			return fmt.Errorf("%w: %w", err, asynq.SkipRetry) // to the dead letter
		}
		return err
	})
	for _, name := range b.env.Queues {
		srv := asynq.NewServerFromRedisClient(b.rdb, asynq.Config{
			Concurrency: cfg.Queues[name].Concurrency,
			Queues:      map[string]int{name: 1},
			RetryDelayFunc: func(n int, err error, _ *asynq.Task) time.Duration {
				// asynq stores the due time in whole seconds: round it up.
				now := time.Now()
				return ceilSecond(now.Add(b.env.Retry(n+1, err))).Sub(now)
			},
			// An interruption is not the job's failure: the attempt is not
			// counted. An unknown kind is (see IsUnknownKind).
			IsFailure:                func(err error) bool { return !IsInterrupted(err) },
			ShutdownTimeout:          max(b.env.ShutdownTimeout, time.Second),
			Logger:                   asynqLogger{b.env.Logger},
			LogLevel:                 asynq.WarnLevel,
			TaskCheckInterval:        cfg.PollInterval,
			DelayedTaskCheckInterval: cfg.PollInterval,
		})
		if err := srv.Start(handler); err != nil {
			for _, s := range b.servers {
				s.Shutdown()
			}
			b.servers = nil
			return fmt.Errorf("asynq server for queue %s: %w", name, err)
		}
		b.servers = append(b.servers, srv)
	}
	return nil
}

func (b *asynqBackend) StopWorkers(ctx context.Context) error {
	b.mu.Lock()
	servers := b.servers
	b.servers = nil
	cancelHard := b.cancelHard
	b.mu.Unlock()
	if len(servers) == 0 {
		return nil
	}
	for _, s := range servers {
		s.Stop() // no new tasks
	}
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, s := range servers {
			wg.Go(s.Shutdown)
		}
		wg.Wait()
		close(done)
	}()
	soft, cancel := drainContext(ctx)
	defer cancel()
	select {
	case <-done:
		cancelHard()
		return nil
	case <-soft.Done():
	}
	// Cancel what still runs: the handlers return, asynq puts their tasks back
	// without counting the attempt.
	cancelHard()
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("asynq servers did not stop within 5s of cancelling their jobs")
	}
}

// call runs an Inspector method (they take no context) bounded by ctx; the
// shared client's per-command deadlines bound the goroutine left behind.
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type res struct {
		v   T
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := fn()
		ch <- res{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (b *asynqBackend) Dead(ctx context.Context, q DeadQuery) ([]DeadJob, error) {
	queues := b.env.Queues
	if q.Queue != "" {
		queues = []string{q.Queue}
	}
	var out []DeadJob
	for _, name := range queues {
		tasks, err := b.newestArchived(ctx, name, q.Limit)
		if errors.Is(err, asynq.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			// asynq appends its SkipRetry's text to the error of a job the
			// plugin sent to the dead letter itself: the job's own error is
			// the one to show.
			last := strings.TrimSuffix(t.LastErr, ": "+asynq.SkipRetry.Error())
			d := DeadJob{ID: name + "/" + t.ID, Kind: t.Type, Queue: name, Attempts: t.Retried + 1, LastError: last, DiedAt: t.LastFailedAt}
			var env envelope
			if json.Unmarshal(t.Payload, &env) == nil {
				d.Payload, d.RequestID = env.Payload, env.RequestID
			}
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DiedAt.After(out[j].DiedAt) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// newestArchived returns the newest limit dead tasks of queue name, in no
// particular order. asynq lists its archive oldest first (a ZRANGE on the time
// of death), in pages of a size: the first page is the whole archive when it
// is not full, else the newest limit are on the page holding the limit-th
// newest and the page after it, found from the archive's size.
func (b *asynqBackend) newestArchived(ctx context.Context, name string, limit int) ([]*asynq.TaskInfo, error) {
	page := func(n int) ([]*asynq.TaskInfo, error) {
		return call(ctx, func() ([]*asynq.TaskInfo, error) {
			return b.inspector.ListArchivedTasks(name, asynq.PageSize(limit), asynq.Page(n))
		})
	}
	first, err := page(1)
	if err != nil || len(first) < limit {
		return first, err
	}
	info, err := call(ctx, func() (*asynq.QueueInfo, error) { return b.inspector.GetQueueInfo(name) })
	if err != nil {
		return nil, err
	}
	from := max(info.Archived-limit, 0)/limit + 1
	var tasks []*asynq.TaskInfo
	for n := from; n <= from+1; n++ {
		more := first
		if n > 1 {
			if more, err = page(n); err != nil {
				return nil, err
			}
		}
		tasks = append(tasks, more...)
	}
	return tasks, nil
}

// archived checks that id ("queue/task") names a dead task.
func (b *asynqBackend) archived(ctx context.Context, id string) (string, string, error) {
	q, tid, ok := strings.Cut(id, "/")
	if !ok || q == "" || tid == "" {
		return "", "", ErrNotFound
	}
	info, err := call(ctx, func() (*asynq.TaskInfo, error) { return b.inspector.GetTaskInfo(q, tid) })
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return "", "", ErrNotFound
	}
	if err != nil {
		return "", "", err
	}
	if info.State != asynq.TaskStateArchived {
		return "", "", ErrNotFound
	}
	return q, tid, nil
}

func (b *asynqBackend) RetryDead(ctx context.Context, id string) error {
	return b.onDead(ctx, id, b.inspector.RunTask)
}

func (b *asynqBackend) DeleteDead(ctx context.Context, id string) error {
	return b.onDead(ctx, id, b.inspector.DeleteTask)
}

// onDead applies op (the inspector's RunTask or DeleteTask) to the dead job
// id names, ErrNotFound when there is none.
func (b *asynqBackend) onDead(ctx context.Context, id string, op func(queue, taskID string) error) error {
	q, tid, err := b.archived(ctx, id)
	if err != nil {
		return err
	}
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, op(q, tid) })
	return err
}

// Stats reads each configured queue's counts. asynq knows a queue only once a
// job was enqueued to it, and GetQueueInfo's error for one it does not know
// is not asynq.ErrQueueNotFound: the known queues are asked first, and a
// queue not among them is empty, not a failure of /ready.
func (b *asynqBackend) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Depth: map[string]int64{}}
	known, err := call(ctx, b.inspector.Queues)
	if err != nil {
		return Stats{}, err
	}
	for _, name := range b.env.Queues {
		if !slices.Contains(known, name) {
			st.Depth[name] = 0
			continue
		}
		info, err := call(ctx, func() (*asynq.QueueInfo, error) { return b.inspector.GetQueueInfo(name) })
		if err != nil {
			return Stats{}, err
		}
		st.Depth[name] = int64(info.Pending + info.Scheduled + info.Retry)
		st.Dead += int64(info.Archived)
	}
	return st, nil
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); r.Equal(t) {
		return t
	} else {
		return r.Add(time.Second)
	}
}

func (b *asynqBackend) Close(context.Context) error { return nil }

// asynqLogger sends asynq's warnings and errors to the plugin's logger.
type asynqLogger struct{ l Logger }

func (a asynqLogger) Debug(args ...any) {}
func (a asynqLogger) Info(args ...any)  {}
func (a asynqLogger) Warn(args ...any)  { a.l.Warn("asynq: " + fmt.Sprint(args...)) }
func (a asynqLogger) Error(args ...any) { a.l.Error("asynq: " + fmt.Sprint(args...)) }
func (a asynqLogger) Fatal(args ...any) { a.l.Error("asynq (fatal): " + fmt.Sprint(args...)) }
