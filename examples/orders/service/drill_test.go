package service

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// TestDrillBilling takes billing away from a running orders service (a fault
// proxy that stops forwarding: billing hangs) and gives it back. While it is
// away GET /orders/{id} answers 503 naming billing, each request within its
// deadline until the breaker opens and answers at once; GET /stock keeps
// answering; /ready says http is degraded; after billing comes back the same
// App serves the order again.
//
// The drill shortens billing's deadlines and cool-down so it runs in seconds:
// with the file's read_timeout (5 s) the first request would wait 5 s before
// its silence opened the breaker, and the breaker would wait 15 s before its
// probe.
func TestDrillBilling(t *testing.T) {
	t.Parallel()
	bill := startBilling(t)
	proxy, err := drills.StartProxy(strings.TrimPrefix(bill.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	b := setup(t, setupOpts{
		billingURL: "http://" + proxy.Addr(),
		replace: []string{
			`read_timeout = "5s"`, `read_timeout = "300ms"`,
			`timeout = "10s"`, `timeout = "1s"`,
			`breaker_cool_down = "15s"`, `breaker_cool_down = "2s"`,
		},
	})
	ada := exampletest.Bearer(t, "ada")
	sku := b.newSKU(t, 10, 400)
	r := b.svc.Do(t, http.MethodPost, "/orders", orderBody(sku, 1), exampletest.JSON(ada...)...)
	if r.Status != http.StatusCreated {
		t.Fatalf("POST /orders = %d %s", r.Status, r.Body)
	}
	order := r.Header.Get("Location")

	d := &drills.Drill{
		Dependency: "billing", Fault: "blackhole (proxy)", BaseURL: b.svc.URL,
		Route: order, Headers: ada, Other: "/stock/" + sku,
		Want: http.StatusServiceUnavailable, NameKey: "upstream", NameValue: "billing", Check: "http",
		Deadline: time.Second + 2*time.Second, // timeout, plus a margin for a loaded machine
		Take:     proxy.Blackhole, Give: proxy.Pass,
		Progress: logWriter{t},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res := d.Run(ctx)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	t.Logf("billing away: first answer %s, %d paid a deadline (slowest %s), then p50 %s; /ready %s; recovered in %s",
		res.FirstAnswer, res.Paid, res.Slowest, res.AnsweredP50, res.Ready, res.Recover)
	if res.Paid > 5 {
		t.Errorf("%d requests paid the deadline, want at most breaker_failures (5)", res.Paid)
	}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
