package channels

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-chi/chi/v5"
)

// page is what the browser loads: it opens an EventSource on each channel
// and lists what arrives as "<data>|<lastEventId>".
const page = `<!doctype html>
<title>channels</title>
<ul id="orders"></ul>
<ul id="news"></ul>
<script>
window.opened = 0;
function listen(path, list) {
  const es = new EventSource(path);
  es.onopen = () => { window.opened++; };
  es.onmessage = (e) => {
    const li = document.createElement('li');
    li.textContent = e.data + '|' + e.lastEventId;
    document.getElementById(list).appendChild(li);
  };
}
listen('/events/orders', 'orders');
listen('/events/news', 'news');
</script>`

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

// switchProxy is the browser's one address in front of the replicas; which
// replica it forwards to can change, as a load balancer's would.
type switchProxy struct{ target atomic.Pointer[url.URL] }

func (s *switchProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(s.target.Load()) },
		FlushInterval: -1, // stream events as they come
		// A replica that stopped refuses the browser's reconnections
		// until the test ends: expected, not worth a log line.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	rp.ServeHTTP(w, r)
}

// A real browser (headless Chromium, driven over the DevTools protocol) opens
// a page whose EventSources stream a durable and a broadcast channel from one
// replica, and receives what another replica publishes. Then that replica
// stops: its streams end cleanly, the browser reconnects (through the same
// address) to a third replica with its Last-Event-ID, and gets the durable
// event published while it had no stream, once.
func TestBrowserReceivesEventsFromAnotherReplica(t *testing.T) {
	t.Parallel()
	chrome := chromiumPath(t)
	cl := newCluster(t, "", "broadcast = [\"news\"]\ndurable = [\"orders\"]\nsse_retry = \"200ms\"\nhealth_check_interval = \"300ms\"")
	routes := func(ch *Plugin, r chi.Router) error {
		r.Get("/", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(page))
		})
		return sseRoutes(SSEOpts{}, "orders", "news")(ch, r)
	}
	a := cl.start(routes)
	b := cl.start(nil) // the replica that publishes
	proxy := &switchProxy{}
	aURL, _ := url.Parse(a.svc.URL)
	proxy.target.Store(aURL)
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.ExecPath(chrome))...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	// The first Run starts the browser: no timeout on its context.
	if err := chromedp.Do(browser, chromedp.Navigate(front.URL+"/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	within := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(browser, d)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := chromedp.Run(within(15*time.Second), chromedp.Poll[bool](`window.opened === 2`)); err != nil {
		t.Fatalf("the page's EventSources did not open: %v", err)
	}
	subscribed(t, a.ch)

	list := func(id string) []string {
		items, err := chromedp.Run(within(5*time.Second),
			chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#`+id+` li')).map(li => li.textContent)`))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return items
	}
	waitItems := func(id string, n int) []string {
		t.Helper()
		if _, err := chromedp.Run(within(15*time.Second), chromedp.Poll[bool](`document.querySelectorAll('#`+id+` li').length >= `+strconv.Itoa(n))); err != nil {
			t.Fatalf("#%s did not get %d events: %v (has %q)", id, n, err, list(id))
		}
		return list(id)
	}

	ctx := context.Background()
	if err := b.ch.Publish(ctx, "orders", []byte(`{"order":1,"status":"paid"}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.ch.Publish(ctx, "news", []byte("hello from another replica")); err != nil {
		t.Fatal(err)
	}
	orders := waitItems("orders", 1)
	data, id, _ := strings.Cut(orders[0], "|")
	if data != `{"order":1,"status":"paid"}` || !validID(id) {
		t.Fatalf("the browser's first order event = %q", orders[0])
	}
	if news := waitItems("news", 1); news[0] != "hello from another replica|" {
		t.Fatalf("the browser's news = %q", news)
	}

	// The replica the browser streams from stops; the balancer sends the
	// reconnection to a new one. An order paid meanwhile is not lost.
	c := cl.start(routes)
	subscribed(t, c.ch)
	cURL, _ := url.Parse(c.svc.URL)
	proxy.target.Store(cURL)
	if err := a.svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.ch.Publish(ctx, "orders", []byte(`{"order":2,"status":"paid"}`)); err != nil {
		t.Fatal(err)
	}
	waitItems("orders", 2)
	time.Sleep(500 * time.Millisecond) // room for a duplicate to show
	orders = list("orders")
	if len(orders) != 2 || !strings.HasPrefix(orders[1], `{"order":2,"status":"paid"}|`) {
		t.Fatalf("after the reconnection the browser has %q; want order 2 once", orders)
	}
	if _, err := chromedp.Run(within(5*time.Second), chromedp.Poll[bool](`window.opened >= 4`)); err != nil {
		t.Fatalf("the EventSources did not reconnect: %v", err)
	}
	if got := metricValue(t, c, `jfast_channels_sse_clients{channel="orders"}`); got != "1" {
		t.Errorf("replica c streams orders to %q clients, want 1", got)
	}
}
