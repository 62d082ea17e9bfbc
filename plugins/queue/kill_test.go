package queue_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// A worker process killed with SIGKILL mid-job: the job is redelivered to
// another worker after the backend's rescue timeout and completed exactly once,
// started at most twice.
func TestKilledWorker(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			killedWorker(t, backend)
		})
	}
}

func killedWorker(t *testing.T, backend string) {
	name := queuetest.QueueName(t)
	runs := filepath.Join(t.TempDir(), "runs")
	settings := []string{`job_timeout = "20s"`, `rescue_after = "21s"`}
	cfg := queuetest.QueueTOML(name, 1, settings...)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+backend, childDBEnv+"="+testDB, childCfgEnv+"="+cfg)
	var stderr strings.Builder
	child.Stderr = &stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "ready" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("worker process exited before ready: %s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker process not ready: %s", stderr.String())
	}

	// The enqueuing side: an App without workers.
	producer := startApp(t, backend, queuetest.Config{Queue: queuetest.QueueTOML(name, 1, append(settings, "workers = false", `kinds = ["crash"]`)...)}, nil, appOpts{})
	q, _ := queue.From(producer.App)
	if _, err := q.Enqueue(context.Background(), "crash", crashJob{File: runs}); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 20*time.Second, "the worker process started the job", func() bool {
		return strings.Count(readFile(runs), "start") == 1
	})
	if err := child.Process.Kill(); err != nil { // SIGKILL: no shutdown, no ack
		t.Fatal(err)
	}
	_ = child.Wait()
	killedAt := time.Now()

	if backend == "redis" {
		// asynq recovers a task 30 s after its 30 s lease lapsed, and its
		// recoverer runs when a server starts and then every minute: a worker
		// started 62 s after the kill recovers it at once.
		time.Sleep(time.Until(killedAt.Add(62 * time.Second)))
	}
	startApp(t, backend, queuetest.Config{Queue: cfg}, func(q *queue.Plugin) {
		_ = queue.Handle(q, "crash", func(ctx context.Context, j crashJob) error {
			appendLine(j.File, "start survivor")
			appendLine(j.File, "done")
			return nil
		})
	}, appOpts{})
	queuetest.Eventually(t, 90*time.Second, "the job completed by the surviving worker", func() bool {
		return strings.Count(readFile(runs), "done") >= 1
	})
	t.Logf("%s: redelivered and completed %s after the kill", backend, time.Since(killedAt).Round(time.Second))
	time.Sleep(2 * time.Second) // a second completion would show by now
	got := readFile(runs)
	if strings.Count(got, "done") != 1 || strings.Count(got, "start") > 2 {
		t.Fatalf("runs:\n%s\nwant exactly one done and at most two starts", got)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
