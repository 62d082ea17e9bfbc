package cache

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func TestCommandsReachTheDependencyObserver(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	t.Cleanup(func() { deletePrefix(t, prefix) })
	obs := &jfasttest.Observer{}
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
	got := obs.Operations()
	// The first command may also have dialled: its handshake (HELLO and the
	// like) runs nested inside it and is not reported on its own.
	want := []string{"cache SET failed=false", "cache GET failed=false", "cache pipeline failed=false"}
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
	obs := &jfasttest.Observer{}
	c := New()
	jfasttest.Start(t, jfasttest.Options{
		TOML: fmt.Sprintf("[plugins]\nenabled = [\"observability\", \"cache\"]\n[plugin.cache]\nurl = %q\nkey_prefix = %q\n",
			sharedURL, prefix),
		Plugins: []framework.Plugin{c, obs}, // compiled in, not enabled
	})
	if err := c.Client().Set(context.Background(), prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := obs.Operations(); len(got) != 0 {
		t.Errorf("observed %q with telemetry not enabled", got)
	}
}
