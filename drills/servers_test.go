package drills

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
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

// pauseResumeHTTP checks that a paused server stops answering url and answers
// again once resumed.
func pauseResumeHTTP(t *testing.T, srv Server, url string) {
	t.Helper()
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(); err != nil {
		t.Fatalf("before the pause: %v", err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := get(); err == nil {
		t.Fatal("a paused server answered")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	client.Timeout = 5 * time.Second
	if err := get(); err != nil {
		t.Fatalf("after resume: %v", err)
	}
}

func TestPrivateS3PauseAndResume(t *testing.T) {
	t.Parallel()
	srv, err := StartS3(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	pauseResumeHTTP(t, srv, srv.Endpoint()+"/")
}

func TestPrivateSMTPPauseAndResume(t *testing.T) {
	t.Parallel()
	srv, err := StartSMTP(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	c, err := smtp.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Hello("drill.test"); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	pauseResumeHTTP(t, srv, srv.API()+"/api/v1/messages")
}

func TestRunServiceRefusesWithoutURLOrRoute(t *testing.T) {
	t.Parallel()
	if _, err := RunService(context.Background(), ServiceOptions{}, io.Discard); err == nil {
		t.Fatal("RunService without a base URL")
	}
}

func TestUserContainerNamesTheVariable(t *testing.T) {
	t.Setenv("JFAST_DRILL_PG_CONTAINER", "")
	if c, _, reason := UserContainer("PG"); c != nil || reason != "JFAST_DRILL_PG_CONTAINER is not set" {
		t.Fatalf("UserContainer(PG) = %v, %q", c, reason)
	}
	t.Setenv("JFAST_DRILL_PG_CONTAINER", "jfast-pg")
	t.Setenv("JFAST_DRILL_PG_URL", "")
	if c, _, reason := UserContainer("PG"); c != nil || !strings.Contains(reason, "JFAST_DRILL_PG_URL") {
		t.Fatalf("UserContainer(PG) without a URL = %v, %q", c, reason)
	}
}

func TestMarkdownTable(t *testing.T) {
	t.Parallel()
	md := Markdown([]Result{
		{Dependency: "db", Fault: "pause", Status: 503, FirstAnswer: 763 * time.Millisecond, Paid: 2, Slowest: 763 * time.Millisecond, AnsweredP50: 71 * time.Microsecond, AnsweredMax: 384 * time.Microsecond, Ready: "degraded", Recover: time.Second},
		{Dependency: "mail", Fault: "pause", Skipped: "not yet"},
	})
	for _, want := range []string{"| db | pause | 503 | 763 ms | 2 | 763 ms | 0.1 ms / 0.4 ms | degraded | 1000 ms | ok |", "SKIP: not yet"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
}

// The docker install script is found from any directory of the repository:
// the scenarios run in drills/scenarios, two levels below the root.
func TestRepoRootFromAnyDepth(t *testing.T) {
	t.Parallel()
	want, err := repoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "scenarios", "..", "../plugins/db"} {
		got, err := repoRoot(dir)
		if err != nil || got != want {
			t.Errorf("repoRoot(%q) = %q, %v; want %q", dir, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(want, installDocker)); err != nil {
		t.Fatal(err)
	}
	if _, err := repoRoot(t.TempDir()); err == nil {
		t.Error("a directory outside the repository found a root")
	}
}
