package queue_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// A process with no job handler starts no workers (they would fetch every
// job and fail it): the worker command refuses, and /ready says "none".
func TestNoHandlerStartsNoWorkers(t *testing.T) {
	t.Parallel()
	name := queuetest.QueueName(t)
	var q *queue.Plugin
	svc := startApp(t, "redis", queuetest.Config{
		Queue: queuetest.QueueTOML(name, 1, `kinds = ["greet"]`),
	}, func(p *queue.Plugin) { q = p }, appOpts{})
	// Bounded so that a worker that runs (the bug) fails the test instead of
	// hanging it: RunWorkers returns at once when it refuses.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := q.RunWorkers(ctx)
	if err == nil || !strings.Contains(err.Error(), "no job handler is registered") {
		t.Fatalf("RunWorkers = %v, want the refusal of a worker with nothing to run", err)
	}
	var ready struct {
		Checks map[string]struct {
			Meta map[string]any `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(svc.Get(t, "/ready").Body, &ready); err != nil {
		t.Fatal(err)
	}
	if w := ready.Checks["queue"].Meta["workers"]; w != "none" {
		t.Fatalf("/ready says the workers are %v, want none", w)
	}
}
