// Package overload is the overload benchmark's service: one handler (a fixed
// slice of CPU, then a wait standing for a dependency) behind each of four
// front doors, the arms compared in docs/performance.md:
//
//   - chi: the handler on a bare chi router, nothing shed;
//   - go-zero: chi with go-zero's adaptive shedder (core/load) in front;
//   - failsafe-go: chi with failsafe-go's adaptive limiter (failsafehttp);
//   - jfast: a jfast App with its defaults ([app.overload] on).
//
// Every arm also serves GET /ready, as cheaply as it can, outside its
// shedding: what an orchestrator's probe meets when the service is
// overloaded. The command in bench/cmd/overload runs each arm in a process
// of its own and offers it an open-loop load.
package overload

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/go-chi/chi/v5"
	"github.com/zeromicro/go-zero/core/load"
	"github.com/zeromicro/go-zero/core/logx"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/internal/openloop"
)

// Arms names the arms in the order the tables list them.
var Arms = []string{"chi", "go-zero", "failsafe-go", "jfast"}

// Work is what the handler does per request: Work.CPU of CPU, then a wait
// of Work.Wait.
type Work struct {
	CPU, Wait time.Duration
	// GoZeroCPUThreshold is go-zero's shedder's CPU threshold, in
	// thousandths of the CPUs its cgroup gives it (its default is 900).
	GoZeroCPUThreshold int64
}

// Serve serves arm on ln until ctx ends.
func Serve(ctx context.Context, arm string, ln net.Listener, w Work) error {
	work := openloop.Work(w.CPU, w.Wait)
	ready := http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ready") })
	var h http.Handler
	switch arm {
	case "chi":
		r := chi.NewRouter()
		r.Get("/ready", ready)
		r.Get("/work", work.ServeHTTP)
		h = r
	case "go-zero":
		logx.Disable()
		logx.DisableStat()
		shedder := load.NewAdaptiveShedder(load.WithCpuThreshold(w.GoZeroCPUThreshold))
		r := chi.NewRouter()
		r.Get("/ready", ready)
		r.Get("/work", func(rw http.ResponseWriter, req *http.Request) {
			promise, err := shedder.Allow()
			if err != nil {
				rw.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			rec := &statusRecorder{ResponseWriter: rw, status: http.StatusOK}
			work.ServeHTTP(rec, req)
			if rec.status >= 500 {
				promise.Fail()
			} else {
				promise.Pass()
			}
		})
		h = r
	case "failsafe-go":
		limiter := adaptivelimiter.NewWithDefaults[*http.Response]()
		r := chi.NewRouter()
		r.Get("/ready", ready)
		r.Method(http.MethodGet, "/work", failsafehttp.NewHandler(work, limiter))
		h = r
	case "jfast":
		return serveJfast(ctx, ln, work)
	default:
		return fmt.Errorf("overload: unknown arm %q (want one of %v)", arm, Arms)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

// serveJfast serves the handler as a jfast route, with the framework's
// defaults; its access log is formatted and discarded.
func serveJfast(ctx context.Context, ln net.Listener, work http.Handler) error {
	addr := ln.Addr().String()
	ln.Close() // the App listens itself, on the same port
	app, err := framework.New(framework.Options{
		ConfigText: "[app]\nlisten = \"" + addr + "\"\n" + os.Getenv("OVERLOAD_JFAST_CONFIG"),
		Environ:    []string{},
		LogOutput:  io.Discard,
		Routes: func(_ *framework.App, r chi.Router) error {
			r.Method(http.MethodGet, "/work", work)
			return nil
		},
	})
	if err != nil {
		return err
	}
	if err := app.Start(ctx); err != nil {
		return err
	}
	if os.Getenv("OVERLOAD_JFAST_STATE") != "" {
		go logLimiter(ctx, app.Overload())
	}
	<-ctx.Done()
	return app.Stop(context.Background())
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// logLimiter writes the front door's readings to stderr every 250 ms
// (OVERLOAD_JFAST_STATE): limit, in flight, queued, baseline and recent
// latency, the wait for a CPU.
func logLimiter(ctx context.Context, l *framework.Limiter) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s := l.State()
			fmt.Fprintf(os.Stderr, "limit %d inflight %d queued %d baseline %s recent %s cpuwait %s spare %d\n",
				s.Limit, s.InFlight, s.Queued, s.Baseline, s.Recent, s.CPUWait, s.Spare)
		}
	}
}
