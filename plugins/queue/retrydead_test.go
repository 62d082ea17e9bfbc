package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
	"github.com/jfastframework/jfast/problem"
)

// TestRetryDeadOfAUniqueJobWhoseKeyIsTaken: a unique job dies, and a new job
// is enqueued with its key. On postgres a dead job frees its key, so the new
// job is stored, and RetryDead of the dead one is refused with an error
// saying the key is held (it was a 503 dependency error, "duplicate key value
// violates unique constraint", from a healthy database), the job staying
// dead. On redis a dead job holds its key, so the new enqueue is a duplicate
// of the dead job, and RetryDead runs it.
func TestRetryDeadOfAUniqueJobWhoseKeyIsTaken(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			name := queuetest.QueueName(t)
			var heal atomic.Bool
			var healed atomic.Int32
			var q *queue.Plugin
			startApp(t, backend, queuetest.Config{Queue: queuetest.QueueTOML(name, 1)}, func(p *queue.Plugin) {
				q = p
				if err := queue.Handle(p, "welcome", func(context.Context, queuetest.Receipt) error {
					if heal.Load() {
						healed.Add(1)
						return nil
					}
					return queue.Permanent(errors.New("mailbox full"))
				}); err != nil {
					t.Fatal(err)
				}
			}, appOpts{})
			ctx := context.Background()
			// The key is this run's own: on postgres a key is per kind
			// across queues, and the database is shared by the package.
			key := queue.UniqueKey(name + "-user-1")
			dead, err := q.Enqueue(ctx, "welcome", queuetest.Receipt{Order: 1}, key)
			if err != nil {
				t.Fatal(err)
			}
			queuetest.Eventually(t, 20*time.Second, "the unique job dead", func() bool {
				jobs, err := q.DeadJobs(ctx, queue.DeadQuery{Queue: name})
				return err == nil && len(jobs) == 1 && jobs[0].ID == dead.ID
			})
			again, err := q.Enqueue(ctx, "welcome", queuetest.Receipt{Order: 2}, key, queue.Delay(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			heal.Store(true)
			err = q.RetryDead(ctx, dead.ID)

			if backend == "redis" {
				if !again.Duplicate || again.ID != dead.ID {
					t.Fatalf("enqueue with the dead job's key = %+v, want a duplicate of the dead job %s", again, dead.ID)
				}
				if err != nil {
					t.Fatalf("RetryDead = %v, want the dead job run again", err)
				}
				queuetest.Eventually(t, 10*time.Second, "the retried job handled", func() bool { return healed.Load() == 1 })
				return
			}
			if again.Duplicate || again.ID == dead.ID {
				t.Fatalf("enqueue with the dead job's key = %+v, want a new job (a dead job frees its key on postgres)", again)
			}
			var de *problem.DependencyError
			if err == nil || errors.As(err, &de) || errors.Is(err, queue.ErrNotFound) || !strings.Contains(err.Error(), "unique key is held by another pending job") {
				t.Fatalf("RetryDead = %v (%T), want a plain error saying the key is held by another pending job", err, err)
			}
			jobs, err := q.DeadJobs(ctx, queue.DeadQuery{Queue: name})
			if err != nil || len(jobs) != 1 || jobs[0].ID != dead.ID {
				t.Fatalf("dead letter after the refused retry = %+v, %v; want the job still dead", jobs, err)
			}
		})
	}
}
