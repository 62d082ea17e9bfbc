package framework_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// servingPlugin is a framework.Server: it accepts TCP connections on a
// loopback port of its own and records when it serves and shuts down.
type servingPlugin struct {
	*fakePlugin
	serveErr error

	mu        sync.Mutex
	ln        net.Listener
	done      chan struct{}
	readiness bool // the App's readiness aggregator was there in Serve
}

func (p *servingPlugin) Serve(app *framework.App) error {
	p.rec.add("serve " + p.name)
	if p.serveErr != nil {
		return p.serveErr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.done, p.readiness = ln, make(chan struct{}), app.Readiness() != nil
	p.mu.Unlock()
	go func() {
		defer close(p.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return nil
}

func (p *servingPlugin) Shutdown(ctx context.Context) error {
	p.rec.add("shutdown " + p.name)
	p.mu.Lock()
	ln, done := p.ln, p.done
	p.mu.Unlock()
	if ln == nil {
		return nil
	}
	ln.Close()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var _ framework.Server = (*servingPlugin)(nil)

func TestServerServesAfterRoutesAndShutsDownBeforePluginsStop(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	a := newFake("a", rec)
	s := &servingPlugin{fakePlugin: newFake("s", rec)}
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"a\", \"s\"]",
		Plugins: []framework.Plugin{a, s},
		Routes: func(app *framework.App, r chi.Router) error {
			rec.add("routes")
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	addr, sawReadiness := s.ln.Addr().String(), s.readiness
	s.mu.Unlock()
	if !sawReadiness {
		t.Error("app.Readiness() was nil in Serve")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the served port does not accept: %v", err)
	}
	c.Close()
	if err := app.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start a", "start s", "routes", "serve s", "shutdown s", "stop s", "stop a"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}

func TestServeErrorFailsTheBootAndStopsThePlugins(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	a := newFake("a", rec)
	s1 := &servingPlugin{fakePlugin: newFake("s1", rec)}
	s2 := &servingPlugin{fakePlugin: newFake("s2", rec), serveErr: errors.New("address in use")}
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"a\", \"s1\", \"s2\"]",
		Plugins: []framework.Plugin{a, s1, s2},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serve plugin s2: address in use") {
		t.Fatalf("err = %v", err)
	}
	want := []string{"start a", "start s1", "start s2", "serve s1", "serve s2", "shutdown s1", "stop s2", "stop s1", "stop a"}
	if got := rec.list(); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if app.Addr() != "" {
		t.Fatal("a failed start must not listen")
	}
}
