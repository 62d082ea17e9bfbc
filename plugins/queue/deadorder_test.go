package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// TestDeadJobsLimitKeepsTheNewest: three jobs die one after the other; a
// DeadJobs with a Limit returns the newest, newest first, not the oldest (on
// redis it returned the oldest: asynq lists its archive oldest first, and the
// first page was read).
func TestDeadJobsLimitKeepsTheNewest(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			name := queuetest.QueueName(t)
			var q *queue.Plugin
			startApp(t, backend, queuetest.Config{Queue: queuetest.QueueTOML(name, 1)}, func(p *queue.Plugin) {
				q = p
				if err := queue.Handle(p, "doomed", func(context.Context, queuetest.Receipt) error {
					return queue.Permanent(fmt.Errorf("rejected"))
				}); err != nil {
					t.Fatal(err)
				}
			}, appOpts{})
			ctx := context.Background()
			var ids []string
			for i := range 3 {
				res, err := q.Enqueue(ctx, "doomed", queuetest.Receipt{Order: i})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.ID)
				var died time.Time
				queuetest.Eventually(t, 20*time.Second, fmt.Sprintf("job %d dead", i), func() bool {
					dead, err := q.DeadJobs(ctx, queue.DeadQuery{Queue: name})
					if err != nil || len(dead) != i+1 {
						return false
					}
					died = dead[0].DiedAt
					return true
				})
				// asynq records a death to the second, and deaths within
				// one second have no order: the next job dies in a later
				// second.
				queuetest.Eventually(t, 5*time.Second, "the second of the death past", func() bool {
					return time.Now().Unix() > died.Unix()
				})
			}
			for _, tc := range []struct {
				limit int
				want  []string
			}{
				{1, ids[2:]},
				{2, []string{ids[2], ids[1]}},
				{0, []string{ids[2], ids[1], ids[0]}}, // the default, 100
			} {
				dead, err := q.DeadJobs(ctx, queue.DeadQuery{Queue: name, Limit: tc.limit})
				if err != nil {
					t.Fatal(err)
				}
				got := make([]string, len(dead))
				for i, d := range dead {
					got[i] = d.ID
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("DeadJobs(Limit: %d) = %v, want the newest first %v (died in the order %v)", tc.limit, got, tc.want, ids)
				}
			}
		})
	}
}
