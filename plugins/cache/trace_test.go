package cache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// observer stands for the telemetry plugin: it records every operation the
// cache reports through the framework's DependencyObserver seam.
type observer struct {
	mu  sync.Mutex
	ops []string
}

type observedKey struct{}

func (o *observer) Name() string { return "telemetry" }

func (o *observer) DependencyObserver() framework.DependencyObserver {
	return func(ctx context.Context, dependency, operation string) (context.Context, func(error)) {
		ctx = context.WithValue(ctx, observedKey{}, operation)
		return ctx, func(err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.ops = append(o.ops, fmt.Sprintf("%s %s err=%v", dependency, operation, err))
		}
	}
}

func (o *observer) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ops...)
}

func TestCommandsReachTheDependencyObserver(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	t.Cleanup(func() { deletePrefix(t, prefix) })
	obs := &observer{}
	c := New()
	jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[plugins]\nenabled = [\"observability\", \"cache\", \"telemetry\"]\n[plugin.cache]\nurl = %q\nkey_prefix = %q\n",
			sharedURL, prefix),
		Plugins: []framework.Plugin{c, obs},
	})
	ctx := context.Background()
	rc := c.Client()
	if err := rc.Set(ctx, prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Get(ctx, prefix+"missing").Err(); err == nil {
		t.Fatal("GET of a missing key succeeded")
	}
	pipe := rc.Pipeline()
	pipe.Get(ctx, prefix+"k")
	pipe.Get(ctx, prefix+"k")
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	got := obs.list()
	// The first command may also have dialled: its handshake (HELLO and the
	// like) runs nested inside it and is not reported on its own.
	want := []string{"cache SET err=<nil>", "cache GET err=<nil>", "cache pipeline err=<nil>"}
	if len(got) != len(want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("observed %q, want %q (a missing key is an answer, not an error)", got, want)
			break
		}
	}
	for _, op := range got {
		if strings.Contains(op, prefix) {
			t.Errorf("operation %q names a key", op)
		}
	}
}

func TestNoHookWithoutTelemetryEnabled(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	t.Cleanup(func() { deletePrefix(t, prefix) })
	obs := &observer{}
	c := New()
	jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[plugins]\nenabled = [\"observability\", \"cache\"]\n[plugin.cache]\nurl = %q\nkey_prefix = %q\n",
			sharedURL, prefix),
		Plugins: []framework.Plugin{c, obs}, // compiled in, not enabled
	})
	if err := c.Client().Set(context.Background(), prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := obs.list(); len(got) != 0 {
		t.Errorf("observed %q with telemetry not enabled", got)
	}
}
