package drills

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeService answers /route with down(w) while away is set, 200 otherwise;
// /ready reports check "dep" unhealthy (degraded) while away; /plain is 200.
func fakeService(t *testing.T, away *atomic.Bool, down func(w http.ResponseWriter), ready string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/route":
			if away.Load() {
				down(w)
				return
			}
			io.WriteString(w, "{}")
		case "/plain":
			io.WriteString(w, "{}")
		case "/ready":
			if away.Load() {
				io.WriteString(w, ready)
				return
			}
			io.WriteString(w, `{"status":"ok","verdict":"ok","checks":{"dep":{"healthy":true}}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func problem503(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `{"status":503,"dependency":"dep"}`)
}

const degraded = `{"status":"degraded","verdict":"degraded","checks":{"dep":{"healthy":false}}}`

// The drill passes a service that keeps the contract, and fails (giving the
// dependency back all the same) one that breaks each part of it.
func TestDrillDetectsEachViolation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		down  func(w http.ResponseWriter)
		ready string
		want  string // in the error; "" means the drill passes
	}{
		{"keeps the contract", problem503, degraded, ""},
		{"500 instead of 503", func(w http.ResponseWriter) { w.WriteHeader(500) }, degraded, "500, want 503"},
		{"503 without problem+json", func(w http.ResponseWriter) { w.WriteHeader(503) }, degraded, "application/problem+json"},
		{"503 naming another dependency", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(503)
			io.WriteString(w, `{"dependency":"other"}`)
		}, degraded, `does not name dependency="dep"`},
		{"slower than the deadline", func(w http.ResponseWriter) { time.Sleep(400 * time.Millisecond); problem503(w) }, degraded, "more than its deadline"},
		{"never answered fast", func(w http.ResponseWriter) { time.Sleep(120 * time.Millisecond); problem503(w) }, degraded, "none was answered under"},
		{"/ready says ok", problem503, `{"status":"ok","verdict":"ok","checks":{"dep":{"healthy":true}}}`, "/ready while dep is away"},
		{"/ready does not name it", problem503, `{"status":"degraded","verdict":"degraded","checks":{"other":{"healthy":false}}}`, `check "dep" unhealthy`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var away atomic.Bool
			var gave atomic.Int32
			d := &Drill{
				Dependency: "dep", Fault: "test", BaseURL: fakeService(t, &away, tc.down, tc.ready),
				Route: "/route", Other: "/plain", Want: http.StatusServiceUnavailable, NameValue: "dep",
				Deadline: 300 * time.Millisecond, MaxPaid: 2, Answered: 3, RecoverWithin: 5 * time.Second,
				Take: func() error { away.Store(true); return nil },
				Give: func() error { gave.Add(1); away.Store(false); return nil },
			}
			r := d.Run(context.Background())
			if gave.Load() != 1 {
				t.Fatalf("Give called %d times, want once", gave.Load())
			}
			if tc.want == "" {
				if r.Err != nil {
					t.Fatalf("a service that keeps the contract failed: %v", r.Err)
				}
				if r.Status != 503 || r.Ready != "degraded" || r.AnsweredMax == 0 {
					t.Fatalf("result %+v", r)
				}
				return
			}
			if r.Err == nil || !strings.Contains(r.Err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", r.Err, tc.want)
			}
		})
	}
}

// A route that does not use the dependency must keep answering.
func TestDrillChecksTheOtherRoute(t *testing.T) {
	t.Parallel()
	var away atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if away.Load() {
			problem503(w)
			return
		}
		io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	d := &Drill{
		Dependency: "dep", Fault: "test", BaseURL: srv.URL, Route: "/route", Other: "/plain",
		Want: http.StatusServiceUnavailable, Deadline: time.Second, Answered: 2,
		Take: func() error { away.Store(true); return nil },
		Give: func() error { away.Store(false); return nil },
	}
	if r := d.Run(context.Background()); r.Err == nil || !strings.Contains(r.Err.Error(), "does not use dep") {
		t.Fatalf("error = %v", r.Err)
	}
}
