package statuspage_test

import (
	"context"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/http"
)

// chromiumPath returns Debian's chromium, or skips the test saying why.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("SKIP: no chromium on the PATH; install it with scripts/install-chromium.sh (make test-servers runs it)")
	return ""
}

// A real browser (headless Chromium over the DevTools protocol) opens the
// status page of "orders", whose upstream "billing" answers. Then billing
// dies: orders' calls fail, its breaker opens, and the page, still the same
// document (no reload), shows the breaker open within a few polls. A
// screenshot of that page is saved: under $JFAST_STATUS_SCREENSHOT when set
// (how docs/status-orders.png is made), else in the test's artifact
// directory (go test -artifacts keeps it).
func TestBrowserSeesTheBreakerOpenWithoutReload(t *testing.T) {
	chrome := chromiumPath(t)
	billing := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.Write([]byte(`{"paid": true}`))
	}))
	t.Cleanup(billing.Close)
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `[app]
name = "orders"
admin_listen = "127.0.0.1:0"
[plugins]
enabled = ["observability", "http"]
[plugin.http.upstreams.billing]
base_url = "` + billing.URL + `"
retries = 1
breaker_failures = 3
breaker_cool_down = "120s"
`,
		Plugins: []framework.Plugin{http.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := http.Client(app, "billing")
			if err != nil {
				return err
			}
			r.Method(nethttp.MethodGet, "/orders/1", framework.Handler(func(w nethttp.ResponseWriter, r *nethttp.Request) error {
				resp, err := c.Get(r.Context(), "/invoices/1")
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				_, err = io.Copy(w, resp.Body)
				return err
			}))
			return nil
		},
	})
	for range 5 {
		if r := svc.Get(t, "/orders/1"); r.Status != 200 {
			t.Fatalf("GET /orders/1 with billing up = %d %s", r.Status, r)
		}
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.ExecPath(chrome), chromedp.WindowSize(1000, 1100))...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	// The first Run starts the browser: no timeout on its context.
	if err := chromedp.Do(browser, chromedp.Navigate(svc.AdminURL+"/status")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	within := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(browser, d)
		t.Cleanup(cancel)
		return ctx
	}
	const breaker = `document.querySelector('#dep-http-billing').dataset.breaker`
	if _, err := chromedp.Run(within(15*time.Second), chromedp.Poll[bool](breaker+` === 'closed' && document.documentElement.dataset.live === 'on'`)); err != nil {
		t.Fatalf("the page does not show billing's breaker closed: %v", err)
	}
	// A mark on this document: a reload would lose it.
	if _, err := chromedp.Run(within(5*time.Second), chromedp.Evaluate[bool](`window.sameDocument = true`)); err != nil {
		t.Fatal(err)
	}

	billing.CloseClientConnections()
	billing.Close() // nothing listens there any more: every attempt is refused
	opened := false
	for range 10 {
		r := svc.Get(t, "/orders/1")
		if r.Status != 503 {
			t.Fatalf("GET /orders/1 with billing down = %d, want 503", r.Status)
		}
		if c, _ := http.Client(svc.App, "billing"); c.Breaker().Snapshot().State.String() == "open" {
			opened = true
			break
		}
	}
	if !opened {
		t.Fatal("billing's breaker did not open after 10 refused calls")
	}
	start := time.Now()
	if _, err := chromedp.Run(within(20*time.Second), chromedp.Poll[bool](breaker+` === 'open'`)); err != nil {
		t.Fatalf("the page did not show the breaker open without a reload: %v", err)
	}
	t.Logf("the page showed the breaker open %v after it opened", time.Since(start).Round(10*time.Millisecond))
	same, err := chromedp.Run(within(5*time.Second), chromedp.Evaluate[bool](`window.sameDocument === true && document.querySelector('#verdict').textContent === 'degraded'`))
	if err != nil || !same {
		t.Fatalf("after the breaker opened: same document and verdict degraded = %v, %v", same, err)
	}

	png, err := chromedp.Run(within(15*time.Second), chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := os.Getenv("JFAST_STATUS_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.ArtifactDir(), "status-billing-open.png")
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))

	// On a phone-sized screen nothing runs off the side.
	if err := chromedp.Do(within(10*time.Second), chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	fits, err := chromedp.Run(within(10*time.Second), chromedp.Poll[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	if err != nil || !fits {
		w, _ := chromedp.Run(within(5*time.Second), chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		t.Fatalf("at 390 px wide the page is %d px wide: %v", w, err)
	}
}
