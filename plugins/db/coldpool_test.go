package db

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/problem"
)

// With no connection open and a server that hangs, the requests arriving
// while the first connection is opening wait for its outcome instead of each
// opening one more connection that waits out connect_timeout too: the
// server sees the first connection and at most the probe's.
func TestColdPoolConcurrentArrivalsWaitForTheFirstConnect(t *testing.T) {
	t.Parallel()
	addr, accepted, count := jfasttest.WatchedSilentServer(t)
	b := setup(t, setupOpts{
		url:  "postgres://postgres@" + addr + "/" + testDB + "?sslmode=disable",
		toml: "connect_timeout = \"3s\"\nping_timeout = \"300ms\"",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const followers = 4
	errs := make(chan error, followers+1)
	query := func() {
		_, err := b.db.Exec(ctx, "SELECT 1")
		errs <- err
	}
	go query()
	<-accepted // the first request is opening the pool's first connection
	for range followers {
		go query()
	}
	for range followers + 1 {
		err := <-errs
		var de *problem.DependencyError
		if !errors.As(err, &de) || de.Dependency != "db" {
			t.Fatalf("got %v; want a db dependency error", err)
		}
	}
	if n := count.Load(); n > 2 {
		t.Fatalf("the hung server got %d connections; want the first request's and at most the probe's", n)
	}
}
