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
// holds it is done, dead, or was never published (its enqueue failed).
type rmqRelease struct {
	id string
	// turn is a one-slot lock: the background release and an acquire that
	// meets id in the lock take turns, so neither deletes the queue under the
	// other's publish.
	turn chan struct{}
}

// rmqReleases are the locks this process is freeing, by lock queue.
type rmqReleases struct {
	mu      sync.Mutex
	pending map[string]*rmqRelease
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
	r := &rmqRelease{id: id, turn: make(chan struct{}, 1)}
	b.releases.mu.Lock()
	b.releases.pending[lock] = r
	b.releases.mu.Unlock()
	b.releases.running.Add(1)
	go b.release(lock, r)
}

func (b *rabbitBackend) release(lock string, r *rmqRelease) {
	defer b.releases.running.Done()
	var err error
	for failures := 0; ; failures++ {
		if failures > 0 && b.clock.Sleep(b.pub.ctx, b.backoff.Delay(failures)) != nil {
			break
		}
		var done bool
		if done, err = b.releaseTurn(lock, r); done {
			return
		}
	}
	b.forget(lock, r)
	b.env.Logger.Warn("rabbitmq unique-key lock not released before the backend closed; the key stays taken until the lock queue is deleted",
		"lock", lock, "job_id", r.id, "error", fmt.Sprint(err))
}

// releaseTurn makes one try at freeing r's lock, bounded by enqueue_timeout.
func (b *rabbitBackend) releaseTurn(lock string, r *rmqRelease) (bool, error) {
	ctx, cancel := context.WithTimeout(b.pub.ctx, b.env.Config.EnqueueTimeout)
	defer cancel()
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-r.turn }()
	if !b.pending(lock, r) {
		return true, nil // an acquire freed it
	}
	st, err := b.pub.wait(ctx)
	if err == nil {
		err = b.free(ctx, st, lock, r.id, true)
	}
	if err != nil {
		return false, err
	}
	b.forget(lock, r)
	return true, nil
}

// releaseNow frees the lock at once when holder is a release pending here
// (the connection works: the caller just used it), so that enqueueing again
// after ErrNotEnqueued is safe without waiting for the background release.
// The queue is kept: the caller publishes to it next.
func (b *rabbitBackend) releaseNow(ctx context.Context, st *rmqState, lock, holder string) (bool, error) {
	b.releases.mu.Lock()
	r := b.releases.pending[lock]
	b.releases.mu.Unlock()
	if r == nil || r.id != holder {
		return false, nil
	}
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-r.turn }()
	if !b.pending(lock, r) {
		return true, nil // the background release landed meanwhile
	}
	if err := b.free(ctx, st, lock, holder, false); err != nil {
		return false, err
	}
	b.forget(lock, r)
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

func (b *rabbitBackend) pending(lock string, r *rmqRelease) bool {
	b.releases.mu.Lock()
	defer b.releases.mu.Unlock()
	return b.releases.pending[lock] == r
}

func (b *rabbitBackend) forget(lock string, r *rmqRelease) {
	b.releases.mu.Lock()
	defer b.releases.mu.Unlock()
	if b.releases.pending[lock] == r {
		delete(b.releases.pending, lock)
	}
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
