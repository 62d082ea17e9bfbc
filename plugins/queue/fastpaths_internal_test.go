package queue

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jfastframework/jfast/internal/deadline"
)

// The fast paths BenchmarkEnqueueCPU measures, checked against what they
// replaced: the job kind check against its regexp (queue names follow
// framework.NameRule, tested in framework), the enqueue context against
// context.WithTimeout, the task IDs against github.com/google/uuid.

// kindRe is KindRule as a regular expression.
var kindRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{1,99}$`)

func TestNameChecksMatchTheRegexps(t *testing.T) {
	t.Parallel()
	names := []string{"", "a", "A", "0", "_a", "-a", ".a", ":a", "a_b-c", "a.b:c", "Ab", "aB",
		"emails.send", "mail:welcome-v2", "é", "a\n", "a b", "a/b", "default", "bench-q_1",
		strings.Repeat("a", 99), strings.Repeat("a", 100), strings.Repeat("a", 101), strings.Repeat("A", 100)}
	// Every byte at the first and at a later position.
	for c := range 256 {
		names = append(names, string([]byte{byte(c)}), string([]byte{'a', byte(c)}), string([]byte{'a', byte(c), 'b'}))
	}
	for _, n := range names {
		if got, want := validKind(n), kindRe.MatchString(n); got != want {
			t.Errorf("validKind(%q) = %v, kindRe says %v", n, got, want)
		}
	}
}

func TestTaskIDsAreUniqueVersion4UUIDs(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool, 100000)
	for range 100000 {
		id, result := taskID(&Message{Kind: "k", Queue: "q-1"})
		if result != "q-1/"+id {
			t.Fatalf("result ID %q, want q-1/%s", result, id)
		}
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("task ID %q: parsed %v (version %d, variant %v), %v", id, u, u.Version(), u.Variant(), err)
		}
		if seen[id] {
			t.Fatalf("task ID %q made twice", id)
		}
		seen[id] = true
	}
	id, result := taskID(&Message{Kind: "k", Queue: "q", UniqueKey: "order-1"})
	if id != "u:k:order-1" || result != "q/u:k:order-1" {
		t.Fatalf("unique key: task ID %q, result ID %q", id, result)
	}
}

type ctxKey struct{}

// sharedTimed reports whether ctx is the shared timer's enqueue context.
func sharedTimed(ctx context.Context) bool {
	_, ok := ctx.(*deadline.Context)
	return ok
}

// enqueueCtxPlugin is a plugin whose enqueue contexts last timeout, on a
// backend that takes the shared timer's.
func enqueueCtxPlugin(timeout time.Duration) *Plugin {
	p := New()
	p.cfg.EnqueueTimeout = timeout
	p.sharedTimer = true
	return p
}

// waitDone waits for ctx to end (the bound only stops a broken test).
func waitDone(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Now()
	case <-time.After(30 * time.Second):
		t.Fatal("the enqueue context did not end")
		return time.Time{}
	}
}

func TestEnqueueContextEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	p := enqueueCtxPlugin(50 * time.Millisecond)
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	before := time.Now()
	ctx, release := p.enqueueContext(parent, time.Now().Add(p.cfg.EnqueueTimeout))
	after := time.Now()
	defer release()
	if !sharedTimed(ctx) {
		t.Fatal("a caller's context that never ends did not get the shared timer's context")
	}
	dl, ok := ctx.Deadline()
	if !ok || dl.Before(before.Add(50*time.Millisecond)) || dl.After(after.Add(50*time.Millisecond)) {
		t.Fatalf("deadline %v (%v), want enqueue_timeout from the call", dl, ok)
	}
	if ctx.Value(ctxKey{}) != "v" {
		t.Fatal("the caller's value is lost")
	}
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	if ctx.Err() != nil {
		t.Fatalf("Err before the deadline: %v", ctx.Err())
	}
	if ended := waitDone(t, ctx); ended.Before(dl) {
		t.Fatalf("ended %v before its deadline", dl.Sub(ended))
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Fatalf("Err %v, Cause %v, want context.DeadlineExceeded", ctx.Err(), context.Cause(ctx))
	}
	waitDone(t, derived)
	if !errors.Is(derived.Err(), context.DeadlineExceeded) {
		t.Fatalf("derived context: Err %v, want context.DeadlineExceeded", derived.Err())
	}
	release() // after the deadline: Err stays
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after release: %v", ctx.Err())
	}
}

func TestEnqueueContextEndsWhenReleased(t *testing.T) {
	t.Parallel()
	p := enqueueCtxPlugin(time.Hour)
	ctx, release := p.enqueueContext(context.Background(), time.Now().Add(p.cfg.EnqueueTimeout))
	derived, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	release()
	waitDone(t, ctx)
	waitDone(t, derived)
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(context.Cause(ctx), context.Canceled) || !errors.Is(derived.Err(), context.Canceled) {
		t.Fatalf("Err %v, Cause %v, derived %v, want context.Canceled", ctx.Err(), context.Cause(ctx), derived.Err())
	}
	if p.deadlines.Timed() != 0 {
		t.Fatal("a released context is still timed")
	}
}

func TestEnqueueContextOfCallersWithAnEndOrADeadline(t *testing.T) {
	t.Parallel()
	p := enqueueCtxPlugin(time.Hour)

	// A sooner deadline is the caller's own: its context as is.
	soon, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ctx, _ := p.enqueueContext(soon, time.Now().Add(p.cfg.EnqueueTimeout)); ctx != soon {
		t.Fatal("a caller's sooner deadline was wrapped")
	}

	// A later deadline, or none, on a context that can end: WithDeadline,
	// ended by the caller's end.
	for _, later := range []time.Duration{0, 2 * time.Hour} {
		parent, cancel := context.WithCancel(context.Background())
		if later > 0 {
			cancel()
			parent, cancel = context.WithTimeout(context.Background(), later)
		}
		before := time.Now()
		ctx, release := p.enqueueContext(parent, time.Now().Add(p.cfg.EnqueueTimeout))
		if sharedTimed(ctx) {
			t.Fatal("a caller's context that can end did not get context.WithDeadline")
		}
		if dl, _ := ctx.Deadline(); dl.Before(before.Add(time.Hour)) || dl.After(time.Now().Add(time.Hour)) {
			t.Fatalf("deadline %v, want enqueue_timeout from the call", dl)
		}
		cancel()
		waitDone(t, ctx)
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err %v after the caller's cancel", ctx.Err())
		}
		release()
	}

	// The shared timer only on a backend that takes it: the redis one.
	for name, factory := range backendFactories {
		if _, ok := factory().(sharedTimerBackend); ok != (name == "redis") {
			t.Errorf("backend %s takes the shared timer: %v", name, ok)
		}
	}
	p.sharedTimer = false
	ctx, release := p.enqueueContext(context.Background(), time.Now().Add(p.cfg.EnqueueTimeout))
	if sharedTimed(ctx) {
		t.Fatal("a backend that does not take the shared timer got its context")
	}
	if dl, ok := ctx.Deadline(); !ok || dl.After(time.Now().Add(time.Hour)) {
		t.Fatalf("deadline %v (%v)", dl, ok)
	}
	release()
}

// Many enqueues at once, released around their deadline: each context ends
// once, never before its deadline, with DeadlineExceeded or Canceled, and the
// shared timer is left with nothing.
func TestEnqueueContextsInFlight(t *testing.T) {
	t.Parallel()
	p := enqueueCtxPlugin(2 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				ctx, release := p.enqueueContext(context.Background(), time.Now().Add(p.cfg.EnqueueTimeout))
				dl, _ := ctx.Deadline()
				if (g+i)%3 == 0 {
					<-ctx.Done()
					if now := time.Now(); now.Before(dl) {
						errs <- errors.New("ended before its deadline")
						return
					}
				}
				release()
				<-ctx.Done()
				if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					errs <- err
					return
				}
				if errors.Is(ctx.Err(), context.DeadlineExceeded) && time.Now().Before(dl) {
					errs <- errors.New("deadline exceeded before the deadline")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p.deadlines.Timed() != 0 {
		t.Fatal("released contexts are still timed")
	}
}

// TestUniqueTaskIDsNeverShared: every kind and key built from pieces that
// hold colons, digits and the letters of the two forms gets its own task ID,
// and a kind without a colon keeps the u:<kind>:<key> form.
func TestUniqueTaskIDsNeverShared(t *testing.T) {
	pieces := []string{"a", "b", ":", "u", "k", "1", "uk1"}
	var words []string
	for _, x := range pieces {
		for _, y := range append([]string{""}, pieces...) {
			for _, z := range append([]string{""}, pieces...) {
				words = append(words, x+y+z)
			}
		}
	}
	type pair struct{ kind, key string }
	seen := map[string]pair{}
	for _, kind := range words {
		if kind[0] == ':' {
			continue // not a kind: kindRe wants a letter or digit first
		}
		for _, key := range words {
			id := uniqueTaskID(kind, key)
			if p, ok := seen[id]; ok && p != (pair{kind, key}) {
				t.Fatalf("kind %q key %q and kind %q key %q share the task ID %q", kind, key, p.kind, p.key, id)
			}
			seen[id] = pair{kind, key}
		}
	}
	if id := uniqueTaskID("order", "a:b"); id != "u:order:a:b" {
		t.Fatalf("kind without a colon: task ID %q, want u:order:a:b", id)
	}
}
