package queue

// The rabbitmq backend's unique keys: a lock queue per key holds one
// message, the ID of the job that holds the key. Taking it is a confirmed
// publish; freeing it removes that ID's message (never another's) and
// deletes the emptied queue.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rmqRelease is a unique-key lock that this process is freeing: the job that
// holds it (id) is done, dead, or was never published (its enqueue failed).
type rmqRelease struct {
	lock, id string
}

// rmqReleases are the locks this process is freeing. Each pending release
// has a one-slot turn: the background release and an acquire that meets its
// ID in the lock take turns, so neither deletes the queue under the other's
// publish.
type rmqReleases struct {
	mu      sync.Mutex
	pending map[rmqRelease]chan struct{}
	running sync.WaitGroup
}

// rmqLockTurns are this process's turns at its lock queues, one lock's turn
// shared by the locks whose names hash alike: an acquire that reads the
// holder and a release that reads the lock leave its messages unacked for a
// moment, and an acquire's publish must not land then (tryLock). 32 turns
// keep enqueues of other keys from waiting on each other but rarely.
type rmqLockTurns struct {
	once  sync.Once
	turns [32]chan struct{}
}

// take waits for lock's turn until ctx ends; done gives it back.
func (t *rmqLockTurns) take(ctx context.Context, lock string) (done func(), err error) {
	t.once.Do(func() {
		for i := range t.turns {
			t.turns[i] = make(chan struct{}, 1)
		}
	})
	h := fnv.New32a()
	_, _ = h.Write([]byte(lock))
	turn := t.turns[h.Sum32()%uint32(len(t.turns))]
	if err := takeTurn(ctx, turn); err != nil {
		return nil, err
	}
	return func() { <-turn }, nil
}

// takeTurn fills the one-slot turn, or gives up when ctx ends.
func takeTurn(ctx context.Context, turn chan struct{}) error {
	select {
	case turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acquire takes the unique-key lock for id, or returns the ID of the pending
// job that holds it.
func (b *rabbitBackend) acquire(ctx context.Context, st *rmqState, lock, id string) (string, error) {
	for range 3 {
		holder, taken, err := b.tryLock(ctx, st, lock, id)
		if err != nil || taken {
			return "", err
		}
		if holder == "" {
			continue // released between the refused publish and the get
		}
		freed, err := b.releaseNow(ctx, st, lock, holder)
		if err != nil {
			return "", err
		}
		if !freed {
			return holder, nil
		}
		// The holder's key was being freed here: it is free now.
	}
	return "", errors.New("the lock changed hands three times in a row")
}

// takeKey is acquire for a job about to be published, its error unmarked
// (the job was not published). When the lock's publish was not confirmed
// the lock may hold id while the job is never published: the key is freed in
// the background, or it would answer Duplicate for a job that does not exist.
func (b *rabbitBackend) takeKey(ctx context.Context, st *rmqState, lock, id string) (string, error) {
	holder, err := b.acquire(ctx, st, lock, id)
	if errors.Is(err, ErrMaybeEnqueued) {
		b.releaseLater(lock, id)
	}
	return holder, unmark(err)
}

// tryLock publishes id to the lock (taken); when the broker refuses it, it
// reads the ID that holds the lock instead (empty: freed meanwhile). It runs
// in the lock's turn: reading the holder leaves its message unacked for a
// moment, and RabbitMQ's length limit counts only ready messages, so a
// publish of another enqueue landing then would be accepted and the lock
// would hold two IDs (two jobs stored for one key).
func (b *rabbitBackend) tryLock(ctx context.Context, st *rmqState, lock, id string) (holder string, taken bool, err error) {
	done, err := b.lockTurns.take(ctx, lock)
	if err != nil {
		return "", false, err
	}
	defer done()
	err = st.adminDo(ctx, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(lock, true, false, false, false, amqp.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"})
		return err
	})
	if err != nil {
		return "", false, err
	}
	b.names.Store("queue:"+lock, struct{}{})
	err = publish(ctx, st, "", lock, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(id)})
	if err == nil || !errors.Is(err, errNack) {
		return "", err == nil, err
	}
	err = st.adminDo(ctx, func(ch *amqp.Channel) error {
		d, ok, err := ch.Get(lock, false)
		if err != nil || !ok {
			return err
		}
		holder = string(d.Body)
		return requeue(ch, lock, d)
	})
	if err != nil && !isNotFound(err) {
		return "", false, err
	}
	return holder, false, nil
}

// releaseLater frees the lock held by id in the background, retried with
// backoff until it is freed or the backend closes: an Enqueue returns within
// its deadline, and a release on a slow link may need a new connection first.
func (b *rabbitBackend) releaseLater(lock, id string) {
	r, turn := rmqRelease{lock: lock, id: id}, make(chan struct{}, 1)
	b.releases.mu.Lock()
	b.releases.pending[r] = turn
	b.releases.mu.Unlock()
	b.releases.running.Add(1)
	go b.release(r, turn)
}

func (b *rabbitBackend) release(r rmqRelease, turn chan struct{}) {
	defer b.releases.running.Done()
	var err error
	for failures := 0; ; failures++ {
		if failures > 0 && b.clock.Sleep(b.pub.ctx, b.backoff.Delay(failures)) != nil {
			break
		}
		var done bool
		if done, err = b.releaseTurn(r, turn); done {
			return
		}
	}
	b.forget(r)
	b.env.Logger.Warn("rabbitmq unique-key lock not released before the backend closed; the key stays taken until the lock queue is deleted",
		"lock", r.lock, "job_id", r.id, "error", fmt.Sprint(err))
}

// releaseTurn makes one try at freeing r's lock, bounded by enqueue_timeout.
func (b *rabbitBackend) releaseTurn(r rmqRelease, turn chan struct{}) (bool, error) {
	ctx, cancel := context.WithTimeout(b.pub.ctx, b.env.Config.EnqueueTimeout)
	defer cancel()
	return b.inTurn(ctx, r, turn, func() error {
		st, err := b.pub.wait(ctx)
		if err != nil {
			return err
		}
		return b.free(ctx, st, r.lock, r.id, true)
	})
}

// releaseNow frees the lock at once when holder is a release pending here
// (the connection works: the caller just used it), so that enqueueing again
// after ErrNotEnqueued is safe without waiting for the background release.
// The queue is kept: the caller publishes to it next.
func (b *rabbitBackend) releaseNow(ctx context.Context, st *rmqState, lock, holder string) (bool, error) {
	r := rmqRelease{lock: lock, id: holder}
	b.releases.mu.Lock()
	turn := b.releases.pending[r]
	b.releases.mu.Unlock()
	if turn == nil {
		return false, nil
	}
	return b.inTurn(ctx, r, turn, func() error { return b.free(ctx, st, lock, holder, false) })
}

// inTurn runs free in r's turn, unless another turn freed r first; either
// way true means r's lock no longer holds its ID.
func (b *rabbitBackend) inTurn(ctx context.Context, r rmqRelease, turn chan struct{}, free func() error) (bool, error) {
	if err := takeTurn(ctx, turn); err != nil {
		return false, err
	}
	defer func() { <-turn }()
	if !b.pending(r) {
		return true, nil
	}
	if err := free(); err != nil {
		return false, err
	}
	b.forget(r)
	return true, nil
}

// free removes id from the lock queue: the key is free. Another ID in the
// lock is left as it is (never another enqueue's key). With deleteEmpty the
// emptied queue is deleted too, so that a publish of id written before and
// landing only now (a connection closed with it in flight) finds no queue and
// is dropped rather than taking the key again. It runs in the lock's turn, as
// an acquire does (tryLock).
func (b *rabbitBackend) free(ctx context.Context, st *rmqState, lock, id string, deleteEmpty bool) error {
	done, err := b.lockTurns.take(ctx, lock)
	if err != nil {
		return err
	}
	defer done()
	deleted := false
	err = st.adminDo(ctx, func(ch *amqp.Channel) error {
		if err := removeID(ch, lock, id); err != nil || !deleteEmpty {
			return err
		}
		_, err := ch.QueueDelete(lock, false, true, false)
		deleted = err == nil
		return err
	})
	var ae *amqp.Error
	switch {
	case isNotFound(err):
		deleted, err = true, nil
	case errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed:
		err = nil // not empty: another enqueue took the key since
	}
	if deleted {
		b.names.Delete("queue:" + lock) // the list stays as long as the pending locks
	}
	return err
}

// lockScanLimit bounds how many messages a release reads from one lock: it
// holds one, and another only when enqueues of other processes raced for the
// key (docs/queue.md, "Unique keys" under RabbitMQ), each adding at most one.
const lockScanLimit = 100

// removeID acks id's message in the lock and puts every other back. It reads
// them all, not the first only: a lock that took two IDs would otherwise stay
// held by the second's job after both were done.
func removeID(ch *amqp.Channel, lock, id string) error {
	var others []amqp.Delivery
	for range lockScanLimit {
		d, ok, err := ch.Get(lock, false)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if string(d.Body) != id {
			others = append(others, d)
			continue
		}
		if err := d.Ack(false); err != nil {
			return err
		}
	}
	if len(others) == 0 {
		return nil
	}
	return requeue(ch, lock, others...)
}

// requeue puts ds back in the lock and returns once the lock's queue took
// them back: a nack has no reply, and a publish landing before the queue
// handled it would find no ready message and be accepted. The broker answers
// a passive declare on the same channel only after its queue handled what
// the channel sent it before (one channel's messages to a classic queue
// arrive in order).
func requeue(ch *amqp.Channel, lock string, ds ...amqp.Delivery) error {
	for _, d := range ds {
		if err := d.Nack(false, true); err != nil {
			return err
		}
	}
	_, err := ch.QueueDeclarePassive(lock, true, false, false, false, nil)
	return err
}

func (b *rabbitBackend) pending(r rmqRelease) bool {
	b.releases.mu.Lock()
	defer b.releases.mu.Unlock()
	_, ok := b.releases.pending[r]
	return ok
}

func (b *rabbitBackend) forget(r rmqRelease) {
	b.releases.mu.Lock()
	defer b.releases.mu.Unlock()
	delete(b.releases.pending, r)
}

// waitReleases gives the releases under way until ctx ends or one
// enqueue_timeout passes (a try's own bound) to land before the backend
// closes.
func (b *rabbitBackend) waitReleases(ctx context.Context) {
	done := make(chan struct{})
	go func() { b.releases.running.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(ctx, b.env.Config.EnqueueTimeout)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
