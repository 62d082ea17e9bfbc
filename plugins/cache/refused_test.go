package cache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

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

// A pipeline's commands carry its *UnavailableError: one the open breaker
// refused never ran, and go-redis sets no error on its commands, so each
// GET would read as an answer of "" (neither redis.Nil nor an error); one
// that ran and failed has go-redis's transport error on its commands, not
// the plugin's. Both, for Pipelined and TxPipelined.
func TestPipelineCommandsCarryTheUnavailableError(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{url: "redis://" + refusedAddr(t) + "/0"})
	ctx := context.Background()
	c := b.cache.Client()
	pipelines := map[string]func(context.Context, func(redis.Pipeliner) error) ([]redis.Cmder, error){
		"Pipelined": c.Pipelined, "TxPipelined": c.TxPipelined,
	}
	check := func(when string) {
		t.Helper()
		for name, run := range pipelines {
			var get *redis.StringCmd
			_, execErr := run(ctx, func(p redis.Pipeliner) error {
				get = p.Get(ctx, b.cache.Key("a"))
				return nil
			})
			v, err := get.Result()
			var ue *UnavailableError
			if !errors.As(execErr, &ue) || !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) || v != "" {
				t.Errorf("%s, %s: Exec error %v; the GET's Result %q, %v: want the *UnavailableError on both", name, when, execErr, v, err)
			}
		}
	}
	check("the breaker closed (the connection refused)")
	for range 5 { // breaker_failures; the pipelines above counted too
		if _, _, err := b.cache.Get(ctx, "k"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("GET with nothing listening: %v", err)
		}
	}
	if s := b.cache.Breaker().Snapshot(); s.State != resilience.StateOpen {
		t.Fatalf("breaker after 7 refused calls = %v, want open", s.State)
	}
	check("the breaker open (refused without running)")
}
