package cache

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
)

func okHandler(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// 50 concurrent requests against a limit of 20 per hour: exactly 20 pass, 30
// get a 429 problem, and the passing ones saw every remaining count from 19 down
// to 0 once — the script's read-modify-write is atomic.
func TestRateLimitExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	// Counting is the point here, not deadlines: a generous command_timeout
	// keeps a loaded machine from failing a script open (which passes the
	// request, as it should, and spoils the count).
	b := setup(t, setupOpts{toml: `command_timeout = "10s"`, routes: func(c *Plugin, r chi.Router) {
		r.With(c.RateLimit(RateLimitOpts{Name: "api", Limit: 20, Period: time.Hour})).Get("/limited", okHandler)
	}})
	const n = 50
	var mu sync.Mutex
	var remaining []int
	statuses := map[int]int{}
	var refused []http.Header
	var bodies [][]byte
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := b.svc.Get(t, "/limited")
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.Status]++
			switch resp.Status {
			case http.StatusOK:
				n, err := strconv.Atoi(resp.Header.Get("RateLimit-Remaining"))
				if err != nil {
					t.Errorf("RateLimit-Remaining = %q", resp.Header.Get("RateLimit-Remaining"))
				}
				remaining = append(remaining, n)
			case http.StatusTooManyRequests:
				refused = append(refused, resp.Header)
				bodies = append(bodies, resp.Body)
			}
			if got := resp.Header.Get("RateLimit-Limit"); got != "20" {
				t.Errorf("RateLimit-Limit = %q, want 20", got)
			}
			if got := resp.Header.Get("RateLimit-Policy"); got != "20;w=3600" {
				t.Errorf("RateLimit-Policy = %q, want 20;w=3600", got)
			}
		}()
	}
	wg.Wait()
	if statuses[200] != 20 || statuses[429] != 30 {
		t.Fatalf("statuses = %v, want 20×200 and 30×429", statuses)
	}
	sort.Ints(remaining)
	for i, r := range remaining {
		if r != i {
			t.Fatalf("remaining counts = %v, want 0..19 once each", remaining)
		}
	}
	for i, h := range refused {
		// One request per 180 s (3600 s / 20) comes back: Retry-After is 180
		// (179 if the burst took over a second).
		if ra := h.Get("Retry-After"); (ra != "180" && ra != "179") || h.Get("RateLimit-Remaining") != "0" {
			t.Errorf("429 headers: Retry-After %q, RateLimit-Remaining %q", h.Get("Retry-After"), h.Get("RateLimit-Remaining"))
		}
		if ct := h.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("429 Content-Type = %q", ct)
		}
		reset, _ := strconv.Atoi(h.Get("RateLimit-Reset"))
		if reset < 3590 || reset > 3600 {
			t.Errorf("429 RateLimit-Reset = %d, want about 3600 (the whole quota is used)", reset)
		}
		var body map[string]any
		if err := json.Unmarshal(bodies[i], &body); err != nil || body["status"] != float64(429) || (body["retry_after"] != float64(180) && body["retry_after"] != float64(179)) {
			t.Errorf("429 body = %s (%v)", bodies[i], err)
		}
	}
}

// Keys are counted apart; an empty key is not counted; Burst is the bucket size.
func TestRateLimitKeysAndBurst(t *testing.T) {
	t.Parallel()
	// Counting is the point here, not deadlines: a generous command_timeout
	// keeps a loaded machine from failing a script open (which passes the
	// request, as it should, and spoils the count).
	b := setup(t, setupOpts{toml: `command_timeout = "10s"`, routes: func(c *Plugin, r chi.Router) {
		r.With(c.RateLimit(RateLimitOpts{Name: "per-user", Limit: 6, Period: time.Minute, Burst: 2,
			Key: func(r *http.Request) string { return r.Header.Get("X-User") }})).Get("/u", okHandler)
	}})
	for _, user := range []string{"ana", "bo"} {
		for i, want := range []int{200, 200, 429} {
			if got := b.svc.Get(t, "/u", "X-User", user).Status; got != want {
				t.Fatalf("%s request %d: %d, want %d", user, i+1, got, want)
			}
		}
	}
	resp := b.svc.Get(t, "/u", "X-User", "ana")
	// 6 per minute: one request per 10 s comes back.
	if ra := resp.Header.Get("Retry-After"); resp.Header.Get("RateLimit-Policy") != "6;w=60;burst=2" || (ra != "10" && ra != "9") {
		t.Errorf("headers = %v", resp.Header)
	}
	for range 5 {
		if got := b.svc.Get(t, "/u").Status; got != 200 {
			t.Fatalf("a request without a key: %d, want 200 (not counted)", got)
		}
	}
}

func TestRateLimitPanicsOnBadOpts(t *testing.T) {
	t.Parallel()
	for _, o := range []RateLimitOpts{{Limit: 0, Period: time.Second}, {Limit: 1}, {Limit: 1, Period: time.Second, Burst: -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RateLimit(%+v) did not panic", o)
				}
			}()
			(&Plugin{}).RateLimit(o)
		}()
	}
}

// TestRateLimitNameWithAColonPanics: a Name holding a colon is refused with
// its own message (the key ratelimit:<Name>:<key> would be ambiguous), not by
// some later nil dereference.
func TestRateLimitNameWithAColonPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, `Name "login:ip" holds a colon`) || !strings.Contains(msg, `"login-ip"`) {
			t.Fatalf("RateLimit with Name login:ip: panic %q, want one naming the colon and the fix", msg)
		}
	}()
	(&Plugin{}).RateLimit(RateLimitOpts{Name: "login:ip", Limit: 1, Period: time.Second})
}
