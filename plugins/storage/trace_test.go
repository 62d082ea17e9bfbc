package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/storage"
)

func startObservedS3(t *testing.T, enabled string, obs *jfasttest.Observer) *storage.Disk {
	t.Helper()
	srv := sharedS3(t)
	var disk *storage.Disk
	jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [" + enabled + "]\n" + s3TOML(srv.Endpoint, srv.newBucket(t)),
		Plugins: []framework.Plugin{storage.New(), obs},
		Routes: func(app *framework.App, _ chi.Router) error {
			d, err := storage.For(app, "files")
			disk = d
			return err
		},
	})
	return disk
}

func TestS3OperationsReachTheDependencyObserver(t *testing.T) {
	t.Parallel()
	obs := &jfasttest.Observer{}
	d := startObservedS3(t, `"storage", "telemetry"`, obs)
	ctx := context.Background()
	if err := d.Put(ctx, "secret-id/a.txt", strings.NewReader("a"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stat(ctx, "secret-id/missing.txt"); err == nil {
		t.Fatal("stat of a missing key succeeded")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Stat(cancelled, "secret-id/a.txt"); err == nil {
		t.Fatal("stat with a cancelled context succeeded")
	}
	got := strings.Join(obs.Operations(), "; ")
	for _, want := range []string{"storage PutObject failed=false", "storage HeadObject failed=false", "storage HeadObject failed=true"} {
		if !strings.Contains(got, want) {
			t.Errorf("observed %q, want %q among them (a 404 is an answer; a cancelled call fails)", got, want)
		}
	}
	if strings.Contains(got, "secret-id") {
		t.Errorf("observed %q: a key was reported", got)
	}
}

func TestS3NoMiddlewareWithoutTelemetryEnabled(t *testing.T) {
	t.Parallel()
	obs := &jfasttest.Observer{}
	d := startObservedS3(t, `"storage"`, obs) // compiled in, not enabled
	if err := d.Put(context.Background(), "a.txt", strings.NewReader("a"), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if got := obs.Operations(); len(got) != 0 {
		t.Errorf("observed %q with telemetry not enabled", got)
	}
}
