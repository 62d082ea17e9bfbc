package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// startBound bounds a jfast serve's boot against the machine's Redis, as
// serve's /live wait in TestEndToEnd does.
const startBound = 30 * time.Second

// lineWriter collects a command's stderr and reports the first line holding
// want on found.
type lineWriter struct {
	want  string
	found chan string

	mu   sync.Mutex
	buf  bytes.Buffer
	sent bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		for line := range strings.Lines(w.buf.String()) {
			if strings.Contains(line, w.want) {
				w.sent = true
				w.found <- line
				break
			}
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestServeWorksNoQueue runs jfast serve against a service's file (queue on
// the machine's Redis, with mail, whose stand-in registers a job kind) while a
// service's job waits in its queue: serve says it starts no queue workers, no
// asynq server works the queue, and the job is still pending, never tried,
// once serve has stopped.
func TestServeWorksNoQueue(t *testing.T) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	q := "jfast-cli-serve-" + hex.EncodeToString(b[:])
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	t.Cleanup(func() { deleteQueue(t, rc, q); rc.Close() })
	opt := asynq.RedisClientOpt{Addr: "127.0.0.1:6379"}
	client := asynq.NewClient(opt)
	defer client.Close()
	inspector := asynq.NewInspector(opt)
	defer inspector.Close()

	job, err := client.Enqueue(asynq.NewTask("greet", []byte(`{}`)), asynq.Queue(q), asynq.MaxRetry(10))
	if err != nil {
		t.Fatalf("enqueue on the machine's Redis (127.0.0.1:6379): %v", err)
	}

	file := filepath.Join(t.TempDir(), "jfast.toml")
	text := fmt.Sprintf(`[app]
name = "orders"
listen = "127.0.0.1:0"
[plugins]
enabled = ["observability", "cache", "queue", "mail"]
[plugin.cache]
url = "redis://127.0.0.1:6379/0"
key_prefix = %[1]q
[plugin.queue]
backend = "redis"
[plugin.queue.queues.%[1]s]
concurrency = 1
`, q)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lineWriter{want: "queue workers", found: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		var stdout bytes.Buffer
		done <- run(ctx, []string{"serve", "--config", file}, &stdout, logs)
	}()
	select {
	case line := <-logs.found:
		if !strings.Contains(line, "queue workers not started") || !strings.Contains(line, "go run . worker") {
			t.Errorf("jfast serve's line about its queue workers:\n%s", line)
		}
	case code := <-done:
		t.Fatalf("jfast serve exited %d before saying what its queue workers do:\n%s", code, logs)
	case <-time.After(startBound):
		t.Fatalf("jfast serve said nothing about its queue workers in %s:\n%s", startBound, logs)
	}
	servers, err := inspector.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if _, ok := s.Queues[q]; ok {
			t.Errorf("an asynq server (%s, pid %d) works the service's queue %s", s.Host, s.PID, q)
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("jfast serve exited %d:\n%s", code, logs)
	}
	info, err := inspector.GetTaskInfo(q, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != asynq.TaskStatePending || info.Retried != 0 || info.LastErr != "" {
		t.Errorf("the service's job after jfast serve: state %s, retried %d, error %q; want pending, never tried", info.State, info.Retried, info.LastErr)
	}
}

// deleteQueue removes asynq queue q from the machine's Redis: its keys and its
// entry in asynq:queues.
func deleteQueue(t *testing.T, c *redis.Client, q string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, "asynq:{"+q+"}*", 500).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("delete queue %s: %v", q, err)
	}
	c.SRem(ctx, "asynq:queues", q)
}

func TestWorkerIsRefused(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := jfast(t, "worker", "--config", "testdata/valid.toml")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "jfast worker: the jfast binary has none of a service's job handlers") ||
		!strings.Contains(stderr, "go run . worker") {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
}
