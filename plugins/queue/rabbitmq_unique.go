package queue

// The rabbitmq backend's unique keys: a lock queue per key holds at most one
// message, the ID of the job that holds the key. Taking it is a confirmed
// publish; freeing it removes that message (only if it is still the ID that
// is being freed) and deletes the emptied queue.

import (
	"context"
	"errors"
	"fmt"
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

// acquire takes the unique-key lock for id, or returns the ID of the pending
// job that holds it.
func (b *rabbitBackend) acquire(ctx context.Context, st *rmqState, lock, id string) (string, error) {
	for range 3 {
		err := st.adminDo(ctx, func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(lock, true, false, false, false, amqp.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"})
			return err
		})
		if err != nil {
			return "", err
		}
		b.names.Store("queue:"+lock, struct{}{})
		err = publish(ctx, st, "", lock, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(id)})
		if err == nil {
			return "", nil
		}
		if !errors.Is(err, errNack) {
			return "", err
		}
		var holder string
		err = st.adminDo(ctx, func(ch *amqp.Channel) error {
			d, ok, err := ch.Get(lock, false)
			if err != nil || !ok {
				return err
			}
			holder = string(d.Body)
			return d.Nack(false, true)
		})
		if err != nil && !isNotFound(err) {
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
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
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

// free removes id from the lock queue: the key is free. A lock held by
// another ID is left as it is (never another enqueue's key). With
// deleteEmpty the emptied queue is deleted too, so that a publish of id
// written before and landing only now (a connection closed with it in
// flight) finds no queue and is dropped rather than taking the key again.
func (b *rabbitBackend) free(ctx context.Context, st *rmqState, lock, id string, deleteEmpty bool) error {
	deleted := false
	err := st.adminDo(ctx, func(ch *amqp.Channel) error {
		d, ok, err := ch.Get(lock, false)
		if err != nil {
			return err
		}
		if ok && string(d.Body) != id {
			return d.Nack(false, true) // another enqueue's key: not ours to free
		}
		if ok {
			if err := d.Ack(false); err != nil {
				return err
			}
		}
		if !deleteEmpty {
			return nil
		}
		_, err = ch.QueueDelete(lock, false, true, false)
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
