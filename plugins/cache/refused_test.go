package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
)

// Nothing listens at the URL: the boot succeeds (a dependency that is down never
// fails it), commands fail fast, the breaker opens after breaker_failures, and the
// password in the URL appears in no error, log line or /ready body.
func TestRefusedRedisAndNoSecrets(t *testing.T) {
	t.Parallel()
	addr := refusedAddr(t)
	b := setup(t, setupOpts{url: "redis://app:hunter22@" + addr + "/0"})
	ctx := context.Background()
	for i := range 5 {
		var err error
		d := elapsed(func() { _, _, err = b.cache.Get(ctx, "k") })
		if !errors.Is(err, ErrUnavailable) || d > time.Second+margin {
			t.Fatalf("GET %d with nothing listening: %v after %s", i+1, err, d)
		}
		if strings.Contains(err.Error(), "hunter22") {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
	if s := b.cache.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker after 5 refused commands = %v, want open", s.State)
	}
	r := b.svc.Get(t, "/ready")
	if r.Status != 200 || !strings.Contains(r.String(), `"degraded"`) {
		t.Errorf("/ready = %d %s", r.Status, r)
	}
	for where, text := range map[string]string{"/ready": r.String(), "logs": b.svc.Logs(), "/metrics": b.svc.Get(t, "/metrics").String()} {
		if strings.Contains(text, "hunter22") {
			t.Errorf("%s leaks the password", where)
		}
	}
}

// The accessor fails the boot, naming the fix, when the plugin is not enabled.
func TestFromNotEnabled(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		Plugins: []framework.Plugin{New()},
		Routes: func(app *framework.App, _ chi.Router) error {
			_, err := From(app)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil {
		_ = app.Stop(context.Background())
		t.Fatal("boot succeeded although Routes asked for a cache that is not enabled")
	}
	if !strings.Contains(err.Error(), `plugin "cache" is not enabled`) {
		t.Errorf("boot error = %v", err)
	}
}
