package queue_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// TestCountDeadJobsCountsInTheDatabase: on postgres the count is a count. It
// counts the kind's dead jobs of the configured queues (not another kind's,
// not a pending job's, not another queue's), and the payloads of the dead
// jobs stay in the database: the count receives a few kilobytes, not the
// megabytes of JSON a dead mail with attachments holds (a count that read
// them could not stop when its context ended, /ready waiting on it).
func TestCountDeadJobsCountsInTheDatabase(t *testing.T) {
	t.Parallel()
	addr, received := countingProxy(t, "127.0.0.1:5432")
	name, other := queuetest.QueueName(t), queuetest.QueueName(t)
	var q *queue.Plugin
	startApp(t, "postgres", queuetest.Config{Queue: queuetest.QueueTOML(name, 1)}, func(p *queue.Plugin) { q = p }, appOpts{addr: addr})
	ctx := context.Background()
	if n, err := q.CountDeadJobs(ctx, "mail.send"); err != nil || n != 0 { // migrates the job tables
		t.Fatalf("count before any job = %d, %v; want 0", n, err)
	}

	const payload = 1 << 20
	conn, err := pgx.Connect(ctx, pgURL("127.0.0.1:5432"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, j := range []struct{ kind, queue, state string }{
		{"mail.send", name, "discarded"},
		{"mail.send", name, "cancelled"},
		{"report", name, "discarded"},
		{"mail.send", other, "discarded"},
		{"mail.send", name, "scheduled"},
	} {
		finalized := "now()"
		if j.state == "scheduled" {
			finalized = "NULL"
		}
		if _, err := conn.Exec(ctx, `INSERT INTO river_job (args, kind, queue, state, finalized_at, scheduled_at, max_attempts, attempt, attempted_at)
			VALUES (jsonb_build_object('job', jsonb_build_object('payload', jsonb_build_object('attachment', $1::text))),
				$2, $3, $4, `+finalized+`, now() + interval '1 hour', 5, 5, now())`,
			strings.Repeat("A", payload), j.kind, j.queue, j.state); err != nil {
			t.Fatal(err)
		}
	}

	before := received.Load()
	n, err := q.CountDeadJobs(ctx, "mail.send")
	got := received.Load() - before
	if err != nil || n != 2 {
		t.Fatalf("count = %d, %v; want 2 (discarded and cancelled mail.send in %s)", n, err, name)
	}
	if got > 64<<10 {
		t.Fatalf("the count received %d bytes from PostgreSQL; want a few kilobytes, not the dead jobs' payloads (%d bytes each)", got, payload)
	}
}

// countingProxy forwards loopback connections to target and counts the bytes
// target sends back; it closes with the test.
func countingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		received atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		conns    []net.Conn
		closed   bool
	)
	pipe := func(dst, src net.Conn, count bool) {
		defer wg.Done()
		defer dst.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if count {
				received.Add(int64(n))
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				client.Close()
				server.Close()
				return
			}
			conns = append(conns, client, server)
			wg.Add(2)
			mu.Unlock()
			go pipe(server, client, false)
			go pipe(client, server, true)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), &received
}
