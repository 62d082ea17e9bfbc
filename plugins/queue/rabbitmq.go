package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// rabbitBackend is the rabbitmq backend, on github.com/rabbitmq/amqp091-go.
//
// Topology, per queue q (P is queue_prefix, X the exchange):
//   - the work queue P+q (durable), bound to X with routing key q;
//   - delay queues P+q+".delay.<ms>" for 100 ms × 2^k (k = 0..17): a
//     queue-wide message TTL, dead-lettered back to X with key q. A job due
//     later is parked in the longest level not past its due time; a consumer
//     that receives it early (the due time is in a header) parks it again, so
//     a job never runs before it is due and a long delay never blocks a short
//     one (every message of a level has the same TTL). When the broker has the
//     delayed-message exchange (detected once, at the first connection), jobs
//     are delayed through X+".delayed" instead;
//   - the dead letter P+q+".dead", bound to the dead-letter exchange X+".dead",
//     each message carrying its attempts, last error and time of death in
//     headers;
//   - a unique-key lock P+q+".unique.<hash>" per pending unique key: a queue of
//     at most one message that refuses a second publish (x-overflow =
//     reject-publish nacks it), released (rabbitmq_unique.go) when the job is
//     done or dead, or its enqueue failed.
//
// Publishing uses one confirm-mode channel: an Enqueue returns after the
// broker confirmed the persistent message. Consuming uses a second connection,
// one channel per queue with its prefetch, and acks after the handler
// returned. Both connections are watched (NotifyClose) and re-made with
// backoff; unacked deliveries of a lost connection are redelivered by the
// broker.
type rabbitBackend struct {
	env     BackendEnv
	cfg     RabbitMQConfig
	clock   resilience.Clock
	backoff resilience.Backoff

	pub *rmqLink
	sub *rmqLink

	// delayed: 0 unknown, 1 the delayed-message exchange is there, 2 it is not.
	delayed atomic.Int32

	names sync.Map // every queue and exchange declared, for tests and tools

	releases  rmqReleases  // unique-key locks being freed
	lockTurns rmqLockTurns // acquires and releases of one lock take turns

	mu          sync.Mutex
	consuming   bool
	stopConsume context.CancelFunc
	consumers   sync.WaitGroup
	running     sync.WaitGroup
	hard        context.Context
	cancelHard  context.CancelFunc
}

// Header names a job carries.
const (
	hdrAttempts = "x-jfast-attempts" // counted attempts so far
	hdrMax      = "x-jfast-max-attempts"
	hdrDue      = "x-jfast-due" // unix ms; absent or 0: now
	hdrUnique   = "x-jfast-unique"
	hdrError    = "x-jfast-error"
	hdrDiedAt   = "x-jfast-died-at" // unix ms
)

// delayLevels are the delay queues' TTLs: 100 ms × 2^k.
var delayLevels = func() []time.Duration {
	var l []time.Duration
	for k := range 18 {
		l = append(l, 100*time.Millisecond<<k)
	}
	return l
}()

// deadScanLimit caps how many dead jobs one list, retry or delete reads.
const deadScanLimit = 10000

func (b *rabbitBackend) Open(_ context.Context, env BackendEnv) error {
	b.env, b.cfg = env, env.Config.RabbitMQ
	b.clock = resilience.RealClock()
	b.backoff = resilience.Backoff{Base: 200 * time.Millisecond, Max: 5 * time.Second}
	b.releases.pending = map[rmqRelease]chan struct{}{}
	b.pub = newLink(b, "publish")
	go b.pub.run()
	return nil
}

func (b *rabbitBackend) workQueue(q string) string { return b.cfg.QueuePrefix + q }
func (b *rabbitBackend) deadQueue(q string) string { return b.cfg.QueuePrefix + q + ".dead" }
func (b *rabbitBackend) delayQueue(q string, d time.Duration) string {
	return b.cfg.QueuePrefix + q + ".delay." + strconv.FormatInt(d.Milliseconds(), 10)
}
func (b *rabbitBackend) deadExchange() string    { return b.cfg.Exchange + ".dead" }
func (b *rabbitBackend) delayedExchange() string { return b.cfg.Exchange + ".delayed" }
func (b *rabbitBackend) lockQueue(q, kind, key string) string {
	h := sha256.Sum256([]byte(kind + "\x00" + key))
	return b.cfg.QueuePrefix + q + ".unique." + hex.EncodeToString(h[:12])
}

// Topology returns the exchanges and queues this backend declared, sorted
// (unique-key locks included): for tests that clean a shared broker.
func (b *rabbitBackend) Topology() []string {
	var out []string
	b.names.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	sort.Strings(out)
	return out
}

var errNack = errors.New("rabbitmq refused the message (negative confirm)")

// publish sends msg and waits for the broker's confirm, bounded by ctx. Its
// error is marked with the outcome: a publish that could not be written, or
// that the broker nacked, was not stored; one written and never confirmed
// (ctx ended, or the connection was lost first) may have been.
func publish(ctx context.Context, st *rmqState, exchange, key string, msg amqp.Publishing) error {
	dc, err := st.pub.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, msg)
	if err != nil {
		return notEnqueued(fmt.Errorf("rabbitmq publish: %w", err))
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			// No confirm within the deadline: the broker stopped answering,
			// or a frame was lost on the way and the channel's confirms no
			// longer line up with its publishes (every later publish would
			// wait for a confirm that never comes). The connection is
			// closed at once, without waiting on the broker, and the link
			// makes a new one.
			_ = st.conn.CloseDeadline(time.Now())
		}
		return maybeEnqueued(fmt.Errorf("rabbitmq did not confirm the publish: %w", err))
	}
	if !ok {
		if st.pub.IsClosed() {
			return maybeEnqueued(errors.New("rabbitmq connection lost before the publish was confirmed"))
		}
		return notEnqueued(errNack)
	}
	return nil
}

// send publishes a job to queue q, parked for delay when positive.
func (b *rabbitBackend) send(ctx context.Context, st *rmqState, q string, delay time.Duration, msg amqp.Publishing) error {
	msg.DeliveryMode = amqp.Persistent
	if delay <= 0 {
		return publish(ctx, st, b.cfg.Exchange, q, msg)
	}
	if b.delayed.Load() == 1 {
		msg.Headers["x-delay"] = max(delay.Milliseconds(), 1)
		return publish(ctx, st, b.delayedExchange(), q, msg)
	}
	lvl := delayLevels[0]
	for _, l := range delayLevels {
		if l <= delay {
			lvl = l
		}
	}
	return publish(ctx, st, "", b.delayQueue(q, lvl), msg)
}

// dueMillis is t in unix milliseconds, rounded up (never early).
func dueMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

func (b *rabbitBackend) Enqueue(ctx context.Context, m *Message) (Result, error) {
	st, err := b.pub.wait(ctx)
	if err != nil {
		return Result{}, notEnqueued(err)
	}
	if err := b.ensureQueue(ctx, st, m.Queue); err != nil {
		return Result{}, notEnqueued(fmt.Errorf("rabbitmq declare queue %s: %w", m.Queue, err))
	}
	id := m.Queue + "/" + uuid.NewString()
	headers := amqp.Table{hdrAttempts: int64(0), hdrMax: int64(m.MaxAttempts)}
	var delay time.Duration
	if !m.RunAt.IsZero() {
		headers[hdrDue] = dueMillis(m.RunAt)
		delay = time.Until(m.RunAt)
	}
	lock := ""
	if m.UniqueKey != "" {
		lock = b.lockQueue(m.Queue, m.Kind, m.UniqueKey)
		existing, err := b.takeKey(ctx, st, lock, id)
		if err != nil {
			// The job itself was not published.
			return Result{}, notEnqueued(fmt.Errorf("rabbitmq unique key %s: %w", m.UniqueKey, err))
		}
		if existing != "" {
			return Result{ID: existing, Queue: m.Queue, Duplicate: true}, nil
		}
		headers[hdrUnique] = lock
	}
	msg := amqp.Publishing{ContentType: "application/json", MessageId: id, Type: m.Kind, Timestamp: time.Now(), Headers: headers, Body: m.Envelope}
	err = b.send(ctx, st, m.Queue, delay, msg)
	if err != nil && ctx.Err() == nil {
		// A publish is retried once (docs/design.md, "Per-dependency defaults"), within the same deadline: on
		// the new connection when the old one was lost under it. Should the
		// broker have stored the first one after all, the job exists twice:
		// at least once. If the retry fails too, the first may still exist.
		maybe := errors.Is(err, ErrMaybeEnqueued)
		if st2, werr := b.pub.waitNew(ctx, st); werr == nil {
			if err = b.ensureQueue(ctx, st2, m.Queue); err == nil {
				err = b.send(ctx, st2, m.Queue, delay, msg)
			} else {
				err = notEnqueued(err)
			}
		}
		if err != nil && maybe {
			err = maybeEnqueued(err)
		}
	}
	if err != nil {
		if lock != "" {
			// Freed even when the job may exist: a key held by a job that
			// does not exist would lose the next Enqueue (Duplicate, and no
			// job); a freed key at worst lets a retry make a second copy.
			// In the background: the Enqueue returns within its deadline.
			b.releaseLater(lock, id)
		}
		return Result{}, mark(err, mayBeEnqueued(err))
	}
	return Result{ID: id, Queue: m.Queue}, nil
}

// hdrInt reads an integer header whatever width the broker gave it (a
// signed integer, or an unsigned one of up to 32 bits).
func hdrInt(t amqp.Table, key string) int64 {
	switch v := reflect.ValueOf(t[key]); v.Kind() {
	case reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8, reflect.Int:
		return v.Int()
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return int64(v.Uint())
	}
	return 0
}

func copyTable(t amqp.Table) amqp.Table {
	out := make(amqp.Table, len(t)+3)
	for k, v := range t {
		if k == "x-death" || k == "x-first-death-exchange" || k == "x-first-death-queue" || k == "x-first-death-reason" ||
			k == "x-last-death-exchange" || k == "x-last-death-queue" || k == "x-last-death-reason" || k == "x-delay" {
			continue // the broker's dead-lettering history of the delay hops
		}
		out[k] = v
	}
	return out
}

func (b *rabbitBackend) StartWorkers(_ context.Context, exec Executor, kinds []string) error {
	if len(kinds) == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.consuming {
		return nil
	}
	b.consuming = true
	b.hard, b.cancelHard = context.WithCancel(context.Background())
	var consumeCtx context.Context
	consumeCtx, b.stopConsume = context.WithCancel(context.Background())
	b.sub = newLink(b, "consume")
	go b.sub.run()
	for _, q := range b.env.Queues {
		b.consumers.Add(1)
		go b.consume(consumeCtx, q, exec)
	}
	return nil
}

// consume works queue q: one channel with its prefetch, handlers bounded by
// the queue's concurrency, a new channel whenever the old one is lost.
func (b *rabbitBackend) consume(ctx context.Context, q string, exec Executor) {
	defer b.consumers.Done()
	qc := b.env.Config.Queues[q]
	prefetch := qc.Prefetch
	if prefetch <= 0 {
		prefetch = qc.Concurrency
	}
	sem := make(chan struct{}, max(qc.Concurrency, 1))
	for failures := 0; ; {
		st, err := b.sub.wait(ctx)
		if err != nil {
			return // stopping
		}
		ch, deliveries, err := b.openConsumer(st, q, prefetch)
		if err != nil {
			failures++
			if failures == 1 || failures%20 == 0 {
				b.env.Logger.Warn("rabbitmq consumer not started; retrying", "queue", q, "error", err.Error())
			}
			if b.clock.Sleep(ctx, b.backoff.Delay(failures)) != nil {
				return
			}
			continue
		}
		failures = 0
	loop:
		for {
			select {
			case <-ctx.Done():
				return // what was prefetched goes back when the connection closes
			case d, ok := <-deliveries:
				if !ok {
					break loop
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				b.running.Add(1)
				go func() {
					defer b.running.Done()
					defer func() { <-sem }()
					b.handle(q, d, exec)
				}()
			}
		}
		if ctx.Err() != nil {
			return
		}
		b.env.Logger.Warn("rabbitmq consumer channel closed; its unacked jobs are redelivered, consuming again", "queue", q, "closed", ch.IsClosed())
		if b.clock.Sleep(ctx, b.backoff.Delay(1)) != nil {
			return
		}
	}
}

func (b *rabbitBackend) openConsumer(st *rmqState, q string, prefetch int) (*amqp.Channel, <-chan amqp.Delivery, error) {
	ch, err := st.conn.Channel()
	if err != nil {
		return nil, nil, err
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, nil, err
	}
	deliveries, err := ch.Consume(b.workQueue(q), "", false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, nil, err
	}
	return ch, deliveries, nil
}

// handle runs one delivery and settles it: ack once the outcome is stored
// (done; retry or dead letter published and confirmed), nack with requeue when
// the attempt was interrupted or the outcome could not be stored.
func (b *rabbitBackend) handle(q string, d amqp.Delivery, exec Executor) {
	log := b.env.Logger
	attempts := int(hdrInt(d.Headers, hdrAttempts))
	maxAttempts := int(hdrInt(d.Headers, hdrMax))
	if maxAttempts <= 0 {
		maxAttempts = b.env.Config.MaxAttempts
	}
	if due := hdrInt(d.Headers, hdrDue); due > 0 {
		if rem := time.Until(time.UnixMilli(due)); rem > 0 {
			b.settle(q, d, rem, copyTable(d.Headers), "park") // not due yet: park again
			return
		}
	}
	ctx, cancel := context.WithCancel(b.hard)
	defer cancel()
	err := exec.Execute(ctx, Delivery{ID: d.MessageId, Kind: d.Type, Queue: q, Envelope: d.Body, Attempt: attempts + 1, MaxAttempts: maxAttempts})
	switch {
	case err == nil:
		if ackErr := d.Ack(false); ackErr != nil {
			log.Warn("rabbitmq ack lost with the connection; the job will run again", "job_id", d.MessageId, "error", ackErr.Error())
			return
		}
		b.releaseOf(d)
	case IsInterrupted(err):
		_ = d.Nack(false, true)
	case IsPermanent(err) || attempts+1 >= maxAttempts:
		h := copyTable(d.Headers)
		h[hdrAttempts] = int64(attempts + 1)
		h[hdrError] = truncate(err.Error(), 4096)
		h[hdrDiedAt] = time.Now().UnixMilli()
		delete(h, hdrDue)
		if b.settleTo(d, b.deadExchange(), q, h) {
			b.releaseOf(d)
		}
	default:
		delay := b.env.Retry(attempts+1, err)
		h := copyTable(d.Headers)
		h[hdrAttempts] = int64(attempts + 1)
		h[hdrError] = truncate(err.Error(), 4096)
		h[hdrDue] = dueMillis(time.Now().Add(delay))
		b.settle(q, d, delay, h, "retry")
	}
}

// settle publishes d again with headers h, parked for delay, then acks d.
func (b *rabbitBackend) settle(q string, d amqp.Delivery, delay time.Duration, h amqp.Table, what string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.env.Config.EnqueueTimeout)
	defer cancel()
	st, err := b.pub.wait(ctx)
	if err == nil {
		err = b.send(ctx, st, q, delay, republish(d, h))
	}
	b.finish(d, err, what)
}

// settleTo publishes d with headers h to exchange/key, then acks d.
func (b *rabbitBackend) settleTo(d amqp.Delivery, exchange, key string, h amqp.Table) bool {
	ctx, cancel := context.WithTimeout(context.Background(), b.env.Config.EnqueueTimeout)
	defer cancel()
	st, err := b.pub.wait(ctx)
	if err == nil {
		msg := republish(d, h)
		msg.DeliveryMode = amqp.Persistent
		err = publish(ctx, st, exchange, key, msg)
	}
	return b.finish(d, err, "dead letter")
}

func (b *rabbitBackend) finish(d amqp.Delivery, err error, what string) bool {
	if err != nil {
		// Not stored: the job goes back to its queue as it was (this attempt
		// is not counted), after a pause so a broker half down is not spun on.
		b.env.Logger.Warn("rabbitmq could not store the job's "+what+"; it is redelivered", "job_id", d.MessageId, "error", err.Error())
		_ = b.clock.Sleep(b.hard, time.Second)
		_ = d.Nack(false, true)
		return false
	}
	if err := d.Ack(false); err != nil {
		b.env.Logger.Warn("rabbitmq ack lost with the connection; the job will run again", "job_id", d.MessageId, "error", err.Error())
		return false
	}
	return true
}

func republish(d amqp.Delivery, h amqp.Table) amqp.Publishing {
	return amqp.Publishing{ContentType: d.ContentType, MessageId: d.MessageId, Type: d.Type, Timestamp: d.Timestamp, Headers: h, Body: d.Body, DeliveryMode: amqp.Persistent}
}

func (b *rabbitBackend) releaseOf(d amqp.Delivery) {
	if lock, _ := d.Headers[hdrUnique].(string); lock != "" {
		b.releaseLater(lock, d.MessageId)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (b *rabbitBackend) StopWorkers(ctx context.Context) error {
	b.mu.Lock()
	if !b.consuming {
		b.mu.Unlock()
		return nil
	}
	b.consuming = false
	stop, cancelHard, sub := b.stopConsume, b.cancelHard, b.sub
	b.mu.Unlock()
	stop() // consumers stop taking deliveries; prefetched ones go back at close
	done := make(chan struct{})
	go func() { b.running.Wait(); close(done) }()
	soft, cancel := drainContext(ctx)
	defer cancel()
	var err error
	select {
	case <-done:
	case <-soft.Done():
		cancelHard() // running handlers see their context end; their jobs are requeued
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			err = errors.New("rabbitmq handlers did not return within 5s of cancelling their jobs")
		}
	}
	cancelHard()
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	// Closing the connection also ends a consumer blocked in an RPC (opening
	// its channel on a hung broker), so the consumers are waited for after.
	err = errors.Join(err, sub.stop(sctx))
	b.consumers.Wait()
	return err
}

// deadJob decodes a dead-letter message.
func deadJob(q string, d amqp.Delivery) DeadJob {
	j := DeadJob{ID: d.MessageId, Kind: d.Type, Queue: q, Attempts: int(hdrInt(d.Headers, hdrAttempts))}
	j.LastError, _ = d.Headers[hdrError].(string)
	if ms := hdrInt(d.Headers, hdrDiedAt); ms > 0 {
		j.DiedAt = time.UnixMilli(ms)
	}
	var env envelope
	if json.Unmarshal(d.Body, &env) == nil {
		j.Payload, j.RequestID = env.Payload, env.RequestID
	}
	return j
}

func isNotFound(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == amqp.NotFound
}

// Dead reads each dead-letter queue on a channel of its own (without acking:
// closing the channel puts every message back), at most 10000 per queue. A
// job being retried or deleted by another caller at that moment may be
// missing from one list.
func (b *rabbitBackend) Dead(ctx context.Context, q DeadQuery) ([]DeadJob, error) {
	st, err := b.pub.wait(ctx)
	if err != nil {
		return nil, err
	}
	queues := b.env.Queues
	if q.Queue != "" {
		queues = []string{q.Queue}
	}
	var out []DeadJob
	for _, name := range queues {
		err := st.tempDo(ctx, func(ch *amqp.Channel) error {
			for range deadScanLimit {
				d, ok, err := ch.Get(b.deadQueue(name), false)
				if err != nil || !ok {
					return err
				}
				out = append(out, deadJob(name, d))
			}
			return nil
		})
		if err != nil && !isNotFound(err) {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].DiedAt.After(out[j].DiedAt) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// takeDead finds id in its queue's dead letter and calls fn with it; fn's nil
// acks it (removes it from the dead letter).
func (b *rabbitBackend) takeDead(ctx context.Context, id string, fn func(st *rmqState, q string, d amqp.Delivery) error) error {
	q, _, ok := strings.Cut(id, "/")
	if !ok || !framework.ValidName(q) {
		return ErrNotFound
	}
	st, err := b.pub.wait(ctx)
	if err != nil {
		return err
	}
	err = st.tempDo(ctx, func(ch *amqp.Channel) error {
		for range deadScanLimit {
			d, ok, err := ch.Get(b.deadQueue(q), false)
			if err != nil {
				return err
			}
			if !ok {
				return ErrNotFound
			}
			if d.MessageId != id {
				continue
			}
			if err := fn(st, q, d); err != nil {
				return err
			}
			return d.Ack(false)
		}
		return ErrNotFound
	})
	if isNotFound(err) {
		return ErrNotFound
	}
	return err
}

// RetryDead republishes a dead job. A job with a unique key takes its key's
// lock again first (released when it died; its name is still in the dead
// message's headers), so that it holds the key while pending, as when it was
// enqueued; while another job holds the key the dead job stays dead.
func (b *rabbitBackend) RetryDead(ctx context.Context, id string) error {
	return b.takeDead(ctx, id, func(st *rmqState, q string, d amqp.Delivery) error {
		h := copyTable(d.Headers)
		h[hdrAttempts] = int64(0) // a fresh attempt count
		delete(h, hdrDiedAt)
		delete(h, hdrDue)
		lock, _ := h[hdrUnique].(string)
		if lock != "" {
			holder, err := b.takeKey(ctx, st, lock, id)
			if err != nil {
				return fmt.Errorf("rabbitmq unique key lock %s: %w", lock, err)
			}
			if holder != "" && holder != id {
				// Not the broker's failure: the plugin passes it on as is.
				return fmt.Errorf("queue: dead job %s: its unique key is held by job %s: %w", id, holder, errUniqueKeyHeld)
			}
		}
		err := b.send(ctx, st, q, 0, republish(d, h))
		if err != nil && lock != "" {
			b.releaseLater(lock, id) // the job stays dead: not its key's holder
		}
		return err
	})
}

func (b *rabbitBackend) DeleteDead(ctx context.Context, id string) error {
	return b.takeDead(ctx, id, func(*rmqState, string, amqp.Delivery) error { return nil })
}

// Stats counts the ready messages of each work queue and its delay queues,
// and of the dead letters (passive declares).
func (b *rabbitBackend) Stats(ctx context.Context) (Stats, error) {
	st, err := b.pub.wait(ctx)
	if err != nil {
		return Stats{}, err
	}
	out := Stats{Depth: map[string]int64{}}
	err = st.adminDo(ctx, func(ch *amqp.Channel) error {
		count := func(name string) (int64, error) {
			qi, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			return int64(qi.Messages), err
		}
		for _, q := range b.env.Queues {
			names := []string{b.workQueue(q)}
			if b.delayed.Load() != 1 {
				for _, lvl := range delayLevels {
					names = append(names, b.delayQueue(q, lvl))
				}
			}
			for _, n := range names {
				c, err := count(n)
				if err != nil {
					return err
				}
				out.Depth[q] += c
			}
			c, err := count(b.deadQueue(q))
			if err != nil {
				return err
			}
			out.Dead += c
		}
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	return out, nil
}

func (b *rabbitBackend) Close(ctx context.Context) error {
	b.mu.Lock()
	consuming := b.consuming
	b.mu.Unlock()
	var errs []error
	if consuming {
		errs = append(errs, b.StopWorkers(ctx))
	}
	b.waitReleases(ctx)
	errs = append(errs, b.pub.stop(ctx))
	b.releases.running.Wait() // each ends with the link's context
	return errors.Join(errs...)
}
