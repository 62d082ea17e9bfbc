package drills

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestPrivateRedisPauseAndResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("a paused redis answered")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 20 { // the client replaces the connection the timeout spoiled
		if lastErr = rdb.Ping(ctx).Err(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("after resume: %v", lastErr)
	}
}

func TestPrivatePostgresPausesPooledConnectionsToo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := StartPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	conn, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	// The established session must stop answering too: that is the hard case.
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = conn.QueryRow(qctx, "select 1").Scan(&one)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("query on a paused server: want a deadline error, got %v", err)
	}
	srv.Resume()
	conn2, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatalf("after resume: %v", err)
	}
	defer conn2.Close(ctx)
	if err := conn2.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
}
