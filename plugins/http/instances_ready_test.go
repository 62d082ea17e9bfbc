package http_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// /ready names the instances whose breaker is half-open (each lets the next
// call probe it) and leaves the check passing, as they are not ejected; it
// says "every breaker closed" only when every one is.
func TestHalfOpenInstancesInReady(t *testing.T) {
	t.Parallel()
	a, b := newSwitchable(503), newSwitchable(503)
	ups, _ := replicas(2, t, a.handle, b.handle)
	toml := `[plugins]
enabled = ["http"]
[plugin.http.upstreams.orders]
base_url = "http://orders.internal:8000"
instances = ["` + ups[0].URL + `", "` + ups[1].URL + `"]
breaker_failures = 1
attempts = 1
`
	clk := jfasttest.NewClock()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: toml, Plugins: []framework.Plugin{jhttp.New()}, Clock: clk,
		Routes: func(app *framework.App, r chi.Router) error {
			orders, err := jhttp.Client(app, "orders")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/x", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				resp, err := orders.Get(r.Context(), "/x")
				if err != nil {
					return err
				}
				w.WriteHeader(resp.StatusCode)
				return nil
			}))
			return nil
		},
	})
	check := func() (string, bool) {
		c := readyBody(t, svc).Checks["http"]
		return c.Detail, c.Healthy
	}
	addrA, addrB := strings.TrimPrefix(ups[0].URL, "http://"), strings.TrimPrefix(ups[1].URL, "http://")
	if detail, healthy := check(); !healthy || detail != "1 upstreams, every breaker closed" {
		t.Fatalf("before any call: healthy %v, detail %q", healthy, detail)
	}
	svc.Get(t, "/x")
	svc.Get(t, "/x") // each instance answered 503 once: both open
	if detail, healthy := check(); healthy || !strings.Contains(detail, "every instance of 'orders' is ejected") {
		t.Fatalf("both open: healthy %v, detail %q", healthy, detail)
	}

	clk.Advance(resilience.DefaultBreakerCoolDown) // both half-open once asked, as /ready does
	addrs := []string{addrA, addrB}
	slices.Sort(addrs)
	want := "1 upstreams, every one available; instances of 'orders' half-open, the next call to each probing it: " + strings.Join(addrs, ", ")
	if detail, healthy := check(); !healthy || detail != want {
		t.Fatalf("both half-open: healthy %v, detail %q, want %q", healthy, detail, want)
	}

	a.status.Store(200)
	b.status.Store(200)
	svc.Get(t, "/x") // a probe closes one; the other is still half-open
	detail, healthy := check()
	if !healthy || !strings.Contains(detail, "instances of 'orders' half-open, the next call to each probing it: ") || strings.Contains(detail, "every breaker closed") {
		t.Fatalf("one closed, one half-open: healthy %v, detail %q", healthy, detail)
	}
	for i := 0; !strings.Contains(detail, "every breaker closed"); i++ {
		if i == 100 {
			t.Fatalf("100 calls and the second probe never went: %q", detail)
		}
		svc.Get(t, "/x")
		detail, _ = check()
	}
}
