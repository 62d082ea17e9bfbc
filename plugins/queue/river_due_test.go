package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// TestPostgresDelayedJobIsDueWithinPollInterval: on postgres a delayed job
// runs after its due time, never before, and no later than River's fetch
// schedule for the configured poll_interval allows (docs/queue.md, "Backends
// compared"). The App has a schema of its own, so its worker client is River's
// only leader there. poll_interval is below River's default fetch cooldown
// (100 ms), which River would refuse as the cooldown of a shorter poll.
func TestPostgresDelayedJobIsDueWithinPollInterval(t *testing.T) {
	t.Parallel()
	const poll = 50 * time.Millisecond
	// A worker looks every poll interval plus River's jitter, a tenth of it
	// and at least 10 ms (its producer's jitteredFetchPollInterval); a look
	// waits up to the fetch cooldown after the one before, which the plugin
	// sets to River's default or to poll_interval when that is shorter.
	dueWithin := poll + max(poll/10, 10*time.Millisecond) + min(river.FetchCooldownDefault, poll)
	// startSlack is the fetch query and the handler's start on a machine busy
	// with the whole suite under -race.
	const startSlack = time.Second
	late := dueWithin + startSlack
	// Two jobs due further apart than late, both within 5 s of the first:
	// one run of River's scheduler (every 5 s on the leader, which made
	// delayed jobs available before) cannot be on time for both.
	delays := []time.Duration{200 * time.Millisecond, 300*time.Millisecond + late}

	name := queuetest.QueueName(t)
	type ran struct {
		job int
		at  time.Time
	}
	runs := make(chan ran, len(delays))
	toml := fmt.Sprintf("poll_interval = %q\nschema = %q\n[plugin.queue.queues.%s]\nconcurrency = %d\n", poll, "due_"+name, name, len(delays))
	svc := startApp(t, "postgres", queuetest.Config{Queue: toml}, func(q *queue.Plugin) {
		_ = queue.Handle(q, "due", func(_ context.Context, job int) error {
			runs <- ran{job, time.Now()}
			return nil
		})
	}, appOpts{})
	queuetest.WorkersRunning(t, svc, 30*time.Second)
	q, _ := queue.From(svc.App)
	due := make([]time.Time, len(delays))
	for i, d := range delays {
		due[i] = time.Now().Add(d) // the job's own due time is no earlier
		if _, err := q.Enqueue(context.Background(), "due", i, queue.Delay(d)); err != nil {
			t.Fatal(err)
		}
	}
	for range delays {
		select {
		case r := <-runs:
			if lag := r.at.Sub(due[r.job]); lag < 0 || lag > late {
				t.Errorf("job due in %s ran %s after its due time, want 0 to %s (poll_interval %s)", delays[r.job], lag, late, poll)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a delayed job did not run within 30 s")
		}
	}
}
