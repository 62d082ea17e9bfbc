package framework_test

import (
	"context"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	httpplugin "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/readiness"
)

// upstreamLike is a plugin holding the three resilience objects of one
// dependency, built on the clock the App hands it at Start, as every plugin
// does; its check reports its breaker like the http plugin's.
type upstreamLike struct {
	cfg struct {
		Password string `koanf:"password"`
	}
	breaker  *resilience.Breaker
	budget   *resilience.RetryBudget
	bulkhead *resilience.Bulkhead
}

func (*upstreamLike) Name() string  { return "upstreamlike" }
func (p *upstreamLike) Config() any { return &p.cfg }
func (p *upstreamLike) Start(_ context.Context, app *framework.App) error {
	clock := app.Clock()
	p.breaker = resilience.NewBreaker(resilience.BreakerOpts{Name: "billing", Failures: 2, Clock: clock})
	p.budget = resilience.NewRetryBudget(resilience.RetryBudgetOpts{Name: "billing", Clock: clock})
	p.bulkhead = resilience.NewBulkhead(resilience.BulkheadOpts{Name: "billing", MaxConcurrent: 7, Clock: clock})
	return nil
}
func (p *upstreamLike) Check(context.Context) readiness.Report {
	s := p.breaker.Snapshot()
	meta := map[string]any{"breaker": s.Meta(), "depth": 12, "dead": 3}
	if s.State == resilience.StateOpen {
		// A detail that quotes a DSN with its password, as a careless
		// check might: the page masks it.
		return readiness.Unreachable("billing unreachable at postgres://app:"+p.cfg.Password+"@10.0.0.7/billing", meta)
	}
	return readiness.Passed("billing answers", meta)
}

const statusSecret = "hunter2-very-secret"

func statusService(t *testing.T, toml string) (*jfasttest.Service, *upstreamLike, *resilience.TestClock) {
	t.Helper()
	p := &upstreamLike{}
	clock := jfasttest.NewClock()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[app]\nname = \"orders\"\n" + toml + "\n[plugins]\nenabled = [\"observability\", \"upstreamlike\"]\n",
		Plugins: []framework.Plugin{p},
		Env:     map[string]string{"JFAST_UPSTREAMLIKE_PASSWORD": statusSecret},
		Clock:   clock,
	})
	return svc, p, clock
}

func TestStatusPageShowsEveryResilienceObject(t *testing.T) {
	t.Parallel()
	svc, p, clock := statusService(t, "admin_listen = \"127.0.0.1:0\"")
	r := svc.AdminGet(t, "/status")
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /status = %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	page := r.String()
	for _, want := range []string{
		"<title>orders · status</title>", `id="plugin-upstreamlike"`, `id="dep-upstreamlike-billing"`,
		"breaker closed", "billing answers", "0 of 2", "0 in flight of 7, 0 waiting",
		`<svg class="breaker-timeline"`, `<svg class="retry-chart"`,
		`<span class="depth">12</span>`, `<span class="dead">3</span>`,
		`href="/status/config"`, `<script src="/status/assets/status.js">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	// The breaker opens: the next render says so, with the transition.
	clock.Advance(time.Minute)
	for range 2 {
		tk, err := p.breaker.Allow()
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(resilience.Failure)
	}
	p.budget.RecordCall()
	p.budget.TryRetry()
	p.budget.TryRetry()
	clock.Advance(3 * time.Second)
	live := svc.AdminGet(t, "/status?part=live").String()
	if strings.Contains(live, "<html") || strings.Contains(live, "<script") {
		t.Fatal("the live part is a whole page")
	}
	for _, want := range []string{
		`data-breaker="open"`, "breaker open", "since " + clock.Now().Add(-3*time.Second).UTC().Format("15:04:05") + " (3s ago)", "probe in 12s",
		"closed → open", `fill="#cf222e"`, "1 retries allowed, 1 refused since start",
		`<span class="verdict v-degraded" id="verdict">degraded</span>`,
		// What fails is named beside the verdict, and what opened the
		// breaker stands above its counts, which the opening reset.
		`<span id="failing">failing: <a href="#plugin-upstreamlike">upstreamlike</a>: <a href="#dep-upstreamlike-billing">billing</a> (breaker open)</span>`,
		"<b>opened at " + clock.Now().Add(-3*time.Second).UTC().Format("15:04:05") + " by</b> 2 consecutive failures (opens at 2)",
		`<div class="cell counter paused"><b>consecutive failures</b>0 of 2</div>`,
	} {
		if !strings.Contains(live, want) {
			t.Errorf("the live part, breaker open, lacks %q:\n%s", want, live)
		}
	}
	if strings.Contains(live, statusSecret) {
		t.Fatal("the page shows a secret from a check's detail")
	}
}

func TestStatusPageNeverShowsSecrets(t *testing.T) {
	t.Parallel()
	svc, _, _ := statusService(t, "admin_listen = \"127.0.0.1:0\"")
	for _, path := range []string{"/status", "/status?part=live", "/status/config"} {
		r := svc.AdminGet(t, path)
		if r.Status != 200 {
			t.Fatalf("GET %s = %d", path, r.Status)
		}
		if strings.Contains(r.String(), statusSecret) {
			t.Fatalf("GET %s shows the secret", path)
		}
	}
	if cfg := svc.AdminGet(t, "/status/config").String(); !strings.Contains(cfg, "password") || !strings.Contains(cfg, "orders") {
		t.Fatalf("the configuration view lacks its keys:\n%s", cfg)
	}
}

func TestStatusPageOnlyOnTheAdminListener(t *testing.T) {
	t.Parallel()
	withAdmin, _, _ := statusService(t, "admin_listen = \"127.0.0.1:0\"")
	without, _, _ := statusService(t, "")
	for _, c := range []struct {
		name string
		get  func() jfasttest.Response
		want int
	}{
		{"admin listener", func() jfasttest.Response { return withAdmin.AdminGet(t, "/status") }, 200},
		{"public listener beside an admin one", func() jfasttest.Response { return withAdmin.Get(t, "/status") }, 404},
		{"public listener, no admin one", func() jfasttest.Response { return without.Get(t, "/status") }, 404},
		{"assets, public", func() jfasttest.Response { return without.Get(t, "/status/assets/status.js") }, 404},
		{"config, public", func() jfasttest.Response { return withAdmin.Get(t, "/status/config") }, 404},
	} {
		if r := c.get(); r.Status != c.want {
			t.Errorf("%s: GET = %d, want %d", c.name, r.Status, c.want)
		}
	}
}

func TestStatusPageAssets(t *testing.T) {
	t.Parallel()
	svc, _, _ := statusService(t, "admin_listen = \"127.0.0.1:0\"")
	for path, want := range map[string]int{
		"/status/assets/status.js":  200,
		"/status/assets/status.css": 200,
		"/status/assets/page.html":  404,
		"/status/assets/":           404,
	} {
		if r := svc.AdminGet(t, path); r.Status != want {
			t.Errorf("GET %s = %d, want %d", path, r.Status, want)
		}
	}
	r := svc.AdminGet(t, "/status")
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	if strings.Contains(r.String(), "http://") || strings.Contains(r.String(), "https://") {
		t.Error("the page loads something from another origin")
	}
}

func TestStatusPageShowsTheLastDrill(t *testing.T) {
	t.Parallel()
	report := filepath.Join(t.TempDir(), "drill.md")
	table := "| dependency | fault | status | result |\n|---|---|---|---|\n| billing | pause | 503 | ok |\n| redis | refuse | 200 | FAIL: a \\| b |\n"
	if err := os.WriteFile(report, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	svc, _, _ := statusService(t, "admin_listen = \"127.0.0.1:0\"\ndrill_report = \""+filepath.ToSlash(report)+"\"")
	page := svc.AdminGet(t, "/status").String()
	for _, want := range []string{`<section id="drill">`, "<th>fault</th>", "<td>pause</td>", "<td>FAIL: a | b</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the drill panel lacks %q", want)
		}
	}
	if err := os.Remove(report); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(svc.AdminGet(t, "/status").String(), `id="drill"`) {
		t.Error("a drill panel with no report file")
	}
}

// orders calls billing, a real http upstream on its own socket, through the
// http plugin; the App runs on the test clock.
func ordersCallingBilling(t *testing.T) (*jfasttest.Service, *httptest.Server, *resilience.TestClock) {
	t.Helper()
	billing := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.Write([]byte(`{"paid": true}`))
	}))
	t.Cleanup(billing.Close)
	clock := jfasttest.NewClock()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `[app]
name = "orders"
admin_listen = "127.0.0.1:0"
[plugins]
enabled = ["observability", "http"]
[plugin.http.upstreams.billing]
base_url = "` + billing.URL + `"
attempts = 1
breaker_failures = 2
breaker_cool_down = "30s"
`,
		Plugins: []framework.Plugin{httpplugin.New()},
		Clock:   clock,
		Routes: func(app *framework.App, r chi.Router) error {
			c, err := httpplugin.Client(app, "billing")
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
	return svc, billing, clock
}

func callOrders(t *testing.T, svc *jfasttest.Service, n, status int) {
	t.Helper()
	for range n {
		if r := svc.Get(t, "/orders/1"); r.Status != status {
			t.Fatalf("GET /orders/1 = %d, want %d: %s", r.Status, status, r)
		}
	}
}

var callsCell = regexp.MustCompile(`calls / attempts \(([^)]*)\)</b>(\d+) / (\d+)`)

// The first call orders makes takes the first reading, which counts it:
// the page counts it all the same, since start, from the zero reading taken
// when the App started.
func TestStatusPageCountsTheFirstCall(t *testing.T) {
	t.Parallel()
	svc, _, clock := ordersCallingBilling(t)
	callOrders(t, svc, 1, 200)
	svc.App.SettleStatusReadings()
	clock.Advance(3 * time.Second)

	page := svc.AdminGet(t, "/status").String()
	if m := callsCell.FindStringSubmatch(page); m == nil || m[1] != "since start" || m[2] != "1" || m[3] != "1" {
		t.Fatalf("billing after its one call: %q; want since start: 1 / 1", m)
	}
}

// Nobody had the page open while orders called billing: the first look
// still shows every call of the last minutes, from the readings the calls
// took every 10 s, not the totals since start.
func TestStatusPageShowsTheLastMinutesAtFirstLook(t *testing.T) {
	t.Parallel()
	svc, _, clock := ordersCallingBilling(t)
	callOrders(t, svc, 3, 200) // within 10 s of the start's reading: none taken
	svc.App.SettleStatusReadings()
	clock.Advance(2 * time.Minute)
	callOrders(t, svc, 4, 200) // the first takes the reading of t0+2m
	svc.App.SettleStatusReadings()
	clock.Advance(time.Minute)

	// The reading of t0+2m came after 2 quiet minutes and counts the
	// first call that took it: the base is still the start's.
	page := svc.AdminGet(t, "/status").String()
	if m := callsCell.FindStringSubmatch(page); m == nil || m[1] != "since start" || m[2] != "7" || m[3] != "7" {
		t.Fatalf("billing at t0+3m: %q; want since start: 7 / 7", m)
	}

	for range 37 { // one call every 10 s, t0+3m10s to t0+9m10s
		clock.Advance(10 * time.Second)
		callOrders(t, svc, 1, 200)
		svc.App.SettleStatusReadings()
	}
	page = svc.AdminGet(t, "/status").String()
	m := callsCell.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no calls / attempts cell on billing's card:\n%s", page)
	}
	// The base is the reading of t0+4m, exactly 5m10s old. It ran beside
	// the call that took it (settled before the clock moved on) and may
	// have read the attempts counter (counted as an attempt starts) and
	// the calls counter (counted as a call ends) before that call counted
	// in either: the 31 calls after it are in the window for sure, and
	// that one may be. Each call made one attempt.
	calls, _ := strconv.Atoi(m[2])
	attempts, _ := strconv.Atoi(m[3])
	if m[1] != "last 5m10s" || calls < 31 || calls > 32 || attempts < 31 || attempts > 32 {
		t.Fatalf("billing at t0+9m10s: %q; want over the last 5m10s, 31 or 32 calls and 31 or 32 attempts", m[0])
	}
	if !strings.Contains(page, "latency p50 / p99 (last 5m10s)") {
		t.Fatalf("no latency over the last 5m10s on the page:\n%s", page)
	}
}

// A breaker that opened, probed and closed before anyone opened the page:
// the first look shows those transitions on its 15-minute timeline.
func TestStatusPageShowsTransitionsFromBeforeItWasOpened(t *testing.T) {
	t.Parallel()
	svc, billing, clock := ordersCallingBilling(t)
	callOrders(t, svc, 1, 200)
	clock.Advance(time.Minute)
	opened := clock.Now()
	billing.Close() // billing dies: two refused connections open the breaker
	callOrders(t, svc, 2, 503)
	clock.Advance(5 * time.Minute)

	live := svc.AdminGet(t, "/status?part=live").String()
	for _, want := range []string{
		// The cool-down has ended: the first look (its /ready check) finds
		// the breaker half-open, ready to probe.
		`data-breaker="half_open"`, "open → half-open",
		opened.UTC().Format("15:04:05") + " closed → open",
		`fill="#cf222e"`, // the red of the open stretch on the timeline
	} {
		if !strings.Contains(live, want) {
			t.Errorf("the first look at the page lacks %q:\n%s", want, live)
		}
	}
}
