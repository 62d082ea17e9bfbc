package statuspage_test

import (
	"context"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/framework/statuspage"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/readiness"
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

// browser is a headless Chromium that has opened url.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func openBrowser(t *testing.T, url string) *browser {
	t.Helper()
	chrome := chromiumPath(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.ExecPath(chrome), chromedp.WindowSize(1000, 1100))...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	// The first Run starts the browser: no timeout on its context.
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// within bounds one exchange with the browser. The bounds are for a browser
// that stopped answering; the waits themselves are for events on the page.
func (b *browser) within(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	b.t.Cleanup(cancel)
	return ctx
}

// waitFor waits for the JavaScript condition to hold on the page.
func (b *browser) waitFor(cond, what string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.within(30*time.Second), chromedp.Poll[bool](cond)); err != nil {
		b.t.Fatalf("the page does not show %s: %v", what, err)
	}
}

// eval returns what the JavaScript expression gives.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.within(10*time.Second), chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// audit is a plugin whose name sorts before http's, with a breaker of its
// own that stays closed and a check that passes: the page must put it after
// a failing http, whatever the alphabet says.
type audit struct{ breaker *resilience.Breaker }

func (*audit) Name() string { return "audit" }
func (*audit) Config() any  { return &struct{}{} }
func (a *audit) Start(_ context.Context, app *framework.App) error {
	a.breaker = resilience.NewBreaker(resilience.BreakerOpts{Name: "ledger", Clock: app.Clock()})
	return nil
}
func (a *audit) Check(context.Context) readiness.Report {
	return readiness.Passed("the ledger answers", map[string]any{"breaker": a.breaker.Snapshot().Meta()})
}

// ids lists the ids of the elements the selector finds, in page order.
func ids(selector string) string {
	return `Array.from(document.querySelectorAll('` + selector + `')).map(e => e.id).join(' ')`
}

// A real browser (headless Chromium over the DevTools protocol) opens the
// status page of "orders", whose upstreams "accounts" and "billing" answer.
// Then billing dies: orders' calls fail, its breaker opens, and the page,
// still the same document (no reload), leads with it: the verdict names
// http and billing, http's section comes before audit's (which sorts first
// by name), billing's card before accounts'; the card says what opened the
// breaker and greys the counts the opening reset. The cool-down ends with no
// call: the card reads "waiting for the next call to probe". A screenshot of
// the open breaker is saved: under $JFAST_STATUS_SCREENSHOT when set, else in
// the test's artifact directory (go test -artifacts keeps it).
func TestBrowserSeesTheBreakerOpenWithoutReload(t *testing.T) {
	chromiumPath(t)
	up := func() *httptest.Server {
		s := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			w.Write([]byte(`{"paid": true}`))
		}))
		t.Cleanup(s.Close)
		return s
	}
	billing, accounts := up(), up()
	// The breakers run on a test clock: the cool-down ends when the test
	// says. No retries: a backoff would wait on that clock too.
	clock := jfasttest.NewClock()
	const coolDown = 120 * time.Second // breaker_cool_down
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `[app]
name = "orders"
admin_listen = "127.0.0.1:0"
[plugins]
enabled = ["observability", "audit", "http"]
[plugin.http.upstreams.accounts]
base_url = "` + accounts.URL + `"
[plugin.http.upstreams.billing]
base_url = "` + billing.URL + `"
attempts = 1
breaker_failures = 3
breaker_cool_down = "120s"
`,
		Plugins: []framework.Plugin{&audit{}, http.New()},
		Clock:   clock,
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

	b := openBrowser(t, svc.AdminURL+"/status")
	const breaker = `document.querySelector('#dep-http-billing').dataset.breaker`
	b.waitFor(breaker+` === 'closed' && document.documentElement.dataset.live === 'on'`, "billing's breaker closed")
	if got := eval[string](b, ids("section.plugin")); got != "plugin-audit plugin-http" {
		t.Fatalf("nothing failing: sections %q, want them by name", got)
	}
	if got := eval[bool](b, `document.querySelector('#failing') === null`); !got {
		t.Fatal("nothing failing, and the verdict names something failing")
	}
	// A mark on this document: a reload would lose it.
	eval[bool](b, `window.sameDocument = true`)

	billing.CloseClientConnections()
	billing.Close() // nothing listens there any more: every attempt is refused
	opened := false
	for range 10 {
		r := svc.Get(t, "/orders/1")
		if r.Status != 503 {
			t.Fatalf("GET /orders/1 with billing down = %d, want 503", r.Status)
		}
		if c, _ := http.Client(svc.App, "billing"); c.Breaker().Snapshot().State == resilience.StateOpen {
			opened = true
			break
		}
	}
	if !opened {
		t.Fatal("billing's breaker did not open after 10 refused calls")
	}
	openedAt := clock.Now().UTC().Format("15:04:05")
	start := time.Now()
	b.waitFor(breaker+` === 'open'`, "the breaker open without a reload")
	t.Logf("the page showed the breaker open %v after it opened", time.Since(start).Round(10*time.Millisecond))
	if !eval[bool](b, `window.sameDocument === true && document.querySelector('#verdict').textContent === 'degraded'`) {
		t.Fatal("after the breaker opened: not the same document, or the verdict is not degraded")
	}

	// What fails leads: named in the verdict, its section and card first.
	for _, c := range []struct{ expr, want string }{
		{`document.querySelector('#failing').textContent`, "failing: http: billing (breaker open)"},
		{ids("section.plugin"), "plugin-http plugin-audit"},
		{ids("#plugin-http .dep"), "dep-http-billing dep-http-accounts"},
		{`document.querySelector('#dep-http-billing .breaker-state').textContent`, "breaker open"},
		// What opened it, where its reset counts would say nothing.
		{`document.querySelector('#dep-http-billing .opened-by').textContent`,
			"opened at " + openedAt + " by 3 consecutive failures (opens at 3)"},
		{`Array.from(document.querySelectorAll('#dep-http-billing .counter')).map(e => e.classList.contains('paused') + ':' + getComputedStyle(e).opacity).join(' ')`,
			"true:0.6 true:0.6"},
		{`document.querySelector('#dep-http-billing .paused-note').textContent`,
			"these counts restarted when it opened and stand still while it is open"},
		{`document.querySelectorAll('#dep-http-accounts .paused, #dep-http-accounts .opened-by').length + ''`, "0"},
	} {
		if got := eval[string](b, c.expr); got != c.want {
			t.Errorf("breaker open: %s = %q, want %q", c.expr, got, c.want)
		}
	}

	png, err := chromedp.Run(b.within(15*time.Second), chromedp.FullScreenshot(100))
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

	// The cool-down ends and no call comes: the next poll finds the breaker
	// half-open with no probe in flight, and says what it waits for.
	clock.Advance(coolDown)
	b.waitFor(breaker+` === 'half_open'`, "the breaker half-open after its cool-down")
	for _, c := range []struct{ expr, want string }{
		{`document.querySelector('#dep-http-billing .breaker-state').textContent`, "breaker half-open"},
		{`document.querySelector('#dep-http-billing .probe').textContent`, "waiting for the next call to probe"},
		{`document.querySelector('#failing').textContent`, "failing: http: billing (breaker half-open)"},
		{`document.querySelector('#plugin-http .detail').textContent`,
			"the breaker of calls to 'billing' is half-open, waiting for the next call to probe"},
		{`document.querySelector('#dep-http-billing .opened-by').textContent`,
			"opened at " + openedAt + " by 3 consecutive failures (opens at 3)"},
	} {
		if got := eval[string](b, c.expr); got != c.want {
			t.Errorf("half-open: %s = %q, want %q", c.expr, got, c.want)
		}
	}
	if text := eval[string](b, `document.querySelector('#live').innerText`); strings.Contains(text, "half_open") || strings.Contains(text, "probe call is in flight") {
		t.Errorf("half-open with no probe, the page reads the raw state or a probe in flight:\n%s", text)
	}

	// On a phone-sized screen nothing runs off the side.
	if err := chromedp.Do(b.within(10*time.Second), chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	fits, err := chromedp.Run(b.within(10*time.Second), chromedp.Poll[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	if err != nil || !fits {
		w := eval[int](b, `document.documentElement.scrollWidth`)
		t.Fatalf("at 390 px wide the page is %d px wide: %v", w, err)
	}
}

// freezer stands in front of a service and can freeze it: a frozen service
// accepts requests and answers none, as a SIGSTOPped process does, until it
// is thawed (then it answers what it held).
type freezer struct {
	next nethttp.Handler
	mu   sync.Mutex
	gate chan struct{} // closed when thawed; nil when never frozen
	held chan struct{} // signalled by each request a freeze holds
}

func (f *freezer) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case f.held <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate == nil {
		f.gate = make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

// A service that stops answering (frozen: its socket open, nothing read or
// written) shows "Lost contact" within PollEvery + the poll's timeout of
// the freeze, and the page comes back by itself when the service does.
func TestBrowserLosesContactWithAFrozenService(t *testing.T) {
	chromiumPath(t)
	svc := jfasttest.Start(t, jfasttest.Options{TOML: "[app]\nname = \"orders\"\nadmin_listen = \"127.0.0.1:0\"\n[plugins]\nenabled = [\"observability\"]\n"})
	admin, err := url.Parse(svc.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(admin)
	transport := &nethttp.Transport{}
	proxy.Transport = transport
	f := &freezer{next: proxy, held: make(chan struct{}, 1)}
	front := httptest.NewServer(f)
	t.Cleanup(func() {
		f.thaw()
		front.Close()
		transport.CloseIdleConnections()
	})

	b := openBrowser(t, front.URL+"/status")
	b.waitFor(`document.documentElement.dataset.contact === 'on'`, "a live poll answered")
	// The page's own constants, as the server rendered them.
	every := time.Duration(eval[int](b, `Number(document.querySelector('#live').dataset.every)`)) * time.Millisecond
	timeout := time.Duration(eval[int](b, `Number(document.querySelector('#live').dataset.timeout)`)) * time.Millisecond
	if every != statuspage.PollEvery || timeout != statuspage.DefaultPollTimeout {
		t.Fatalf("the page polls every %v with a %v timeout, want %v and %v", every, timeout, statuspage.PollEvery, statuspage.DefaultPollTimeout)
	}
	// Frozen right after a poll ended, the page asks again after every and
	// gives up after timeout; one more interval is allowed for the
	// browser's own timers. That bound is the 5 s docs/status.md promises.
	bound := every + timeout + every
	if bound > 5*time.Second {
		t.Fatalf("PollEvery %v + the poll's timeout %v + PollEvery is %v, more than the 5 s docs/status.md promises", every, timeout, bound)
	}

	f.freeze()
	frozen := time.Now()
	select {
	case <-f.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no poll reached the frozen service")
	}
	b.waitFor(`document.documentElement.dataset.contact === 'lost'`, `"Lost contact" with the service frozen`)
	lostAt := time.UnixMilli(int64(eval[float64](b, `Number(document.querySelector('#conn').dataset.lostAt)`)))
	banner := eval[string](b, `document.querySelector('#conn').textContent`)
	took := lostAt.Sub(frozen)
	t.Logf("frozen → %q after %v", banner, took.Round(10*time.Millisecond))
	if want := regexp.MustCompile(`^Lost contact with the service at \d\d:\d\d:\d\d UTC \(no answer within 3 s\); retrying every 1 s\.$`); !want.MatchString(banner) {
		t.Errorf("banner %q, want it to match %s", banner, want)
	}
	if took > bound {
		t.Errorf(`"Lost contact" %v after the freeze, more than PollEvery + timeout + PollEvery = %v`, took, bound)
	}
	if !eval[bool](b, `!document.querySelector('#conn').hidden`) {
		t.Error("the banner is hidden")
	}

	f.thaw()
	b.waitFor(`document.documentElement.dataset.contact === 'on' && document.querySelector('#conn').hidden`, "contact again after the thaw")
}
