package statuspage

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

//go:embed assets
var assets embed.FS

var page = template.Must(template.New("status").ParseFS(assets, "assets/page.html"))

// Source is what the page reads. Every field but Ready may be zero.
type Source struct {
	// Service and Env name the service in the page's title.
	Service, Env string
	// Ready runs the /ready checks (the aggregator's Run).
	Ready func(ctx context.Context) readiness.Result
	// Registry holds the breakers, budgets and bulkheads.
	Registry *resilience.Registry
	// Metrics is the registry /metrics serves: the dependencies' calls,
	// attempts and latency are read from it. With a Registry too, the
	// Handler keeps a reading every 10 s, taken on the calls' path through
	// the Registry's OnTick, so the page shows the last minutes at once;
	// call Close to stop.
	Metrics prometheus.Gatherer
	// Config writes the effective configuration with its secrets masked,
	// served at /status/config. Nil serves no configuration.
	Config func(w io.Writer) error
	// Mask masks secrets in free text (a check's detail). Nil leaves it.
	Mask func(string) string
	// DrillReport is the Markdown file `jfast drill --report` writes; the
	// page shows its table when the file exists. Empty shows none.
	DrillReport string
	// Now is the time source of the page. Defaults to the Registry's
	// clock, else time.Now.
	Now func() time.Time
	// PollTimeout is how long the page's live poll waits for an answer
	// before it shows "Lost contact". Defaults to [DefaultPollTimeout]; it
	// must exceed the time the /ready checks may take (the aggregator's
	// timeout), or a slow check reads as a lost service.
	PollTimeout time.Duration
	// FrontDoor reads the front door's concurrency limit. Nil shows no
	// card (app.overload.enabled = false).
	FrontDoor func() *FrontDoor
}

// The live poll: the page fetches its live part every PollEvery after the
// previous poll ended, and gives a poll up after the Source's PollTimeout.
// A service that stops answering (frozen, or its host cut off) shows "Lost
// contact" at most PollEvery + PollTimeout after it stopped: 4 s by default.
const (
	PollEvery          = time.Second
	DefaultPollTimeout = 3 * time.Second
)

// Handler serves the page; mount it at /status.
type Handler struct {
	src     Source
	mux     *http.ServeMux
	traffic *traffic

	mu      sync.Mutex
	running *readyRun // the /ready run in progress, if any
}

// readyRun is one run of the checks, shared by the renders that ask while it
// is in progress.
type readyRun struct {
	done chan struct{}
	res  readiness.Result
}

// New returns the page's handler, to be mounted at /status: the page at
// /status, its live part at /status?part=live, its assets under
// /status/assets/ and the masked configuration at /status/config.
func New(src Source) *Handler {
	if src.Now == nil {
		if src.Registry != nil {
			src.Now = src.Registry.Now
		} else {
			src.Now = time.Now
		}
	}
	if src.Mask == nil {
		src.Mask = func(s string) string { return s }
	}
	if src.PollTimeout <= 0 {
		src.PollTimeout = DefaultPollTimeout
	}
	h := &Handler{src: src, mux: http.NewServeMux(), traffic: newTraffic(src.Metrics, src.Now())}
	if src.Registry != nil && src.Metrics != nil {
		src.Registry.OnTick(sampleEvery, h.traffic.tick)
	}
	sub, _ := fs.Sub(assets, "assets")
	h.mux.Handle("GET /status/assets/", http.StripPrefix("/status/assets/", noTemplates(http.FileServerFS(sub))))
	h.mux.HandleFunc("GET /status/config", h.serveConfig)
	h.mux.HandleFunc("GET /status", h.servePage)
	return h
}

// noTemplates keeps the page's template out of the assets served.
func noTemplates(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".html") || r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}

// Close stops the readings the calls take for the page and waits for the
// one in progress, if any. The page still renders, from the metrics alone.
func (h *Handler) Close() {
	if h.src.Registry != nil && h.src.Metrics != nil {
		h.src.Registry.OnTick(0, nil)
	}
	h.traffic.close()
}

// Settle waits for the reading in progress, if any, and for the ticks that
// came while it was taken: what the calls made so far have asked to be read
// has been read when it returns.
func (h *Handler) Settle() { h.traffic.settle() }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) serveConfig(w http.ResponseWriter, _ *http.Request) {
	if h.src.Config == nil {
		http.Error(w, "no configuration view", http.StatusNotFound)
		return
	}
	var b bytes.Buffer
	if err := h.src.Config(&b); err != nil {
		http.Error(w, "the configuration could not be written", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	v := h.build(r.Context())
	name := "page"
	if r.URL.Query().Get("part") == "live" {
		name = "live"
	}
	var b bytes.Buffer
	if err := page.ExecuteTemplate(&b, name, v); err != nil {
		http.Error(w, "the status page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Everything the page loads is its own: a script or style injected
	// through a check's detail could not run.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b.Bytes())
}

// runReady returns the /ready result. Renders that ask while a run is in
// progress share it, so many viewers polling at once run the checks once.
func (h *Handler) runReady(ctx context.Context) readiness.Result {
	if h.src.Ready == nil {
		return readiness.Result{Status: readiness.OK}
	}
	h.mu.Lock()
	if run := h.running; run != nil {
		h.mu.Unlock()
		select {
		case <-run.done:
			return run.res
		case <-ctx.Done():
			return readiness.Result{Status: readiness.Degraded}
		}
	}
	run := &readyRun{done: make(chan struct{})}
	h.running = run
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.running = nil
		h.mu.Unlock()
		close(run.done)
	}()
	// The run is shared: a viewer who leaves must not cut it for the
	// others. The aggregator bounds it with readiness_timeout.
	run.res = h.src.Ready(context.WithoutCancel(ctx))
	return run.res
}

// view is what the template renders.
type view struct {
	Service, Env, Base string
	At                 string
	// PollEvery and PollTimeout are the live poll's, in milliseconds.
	PollEvery, PollTimeout int64
	Verdict                readiness.Overall
	// Failing names what is failing, in the order of the sections below.
	Failing []failingView
	Plugins []pluginView
	Drill   *drillView
	Front   *frontDoorView
}

// failingView is one failing plugin in the verdict: its check's status
// when the check fails, and its dependencies whose breaker is not closed.
type failingView struct {
	Name   string
	Status string // the check's, when it fails: "check failed", "check timed out"
	Deps   []failingDep
}

type failingDep struct{ ID, Name, State string }

type pluginView struct {
	Name   string
	Report *readiness.Report
	Queue  *queueView
	Deps   []depView
	rank   int // see rankPlugin
}

type queueView struct{ Depth, Dead string }

type depView struct {
	ID, Name string
	Breaker  *breakerView
	Budget   *budgetView
	Bulkhead *resilience.BulkheadSnapshot
	Traffic  *trafficView
}

type breakerView struct {
	// State is the breaker's state as /ready names it (closed, open,
	// half_open); StateText as the page writes it.
	State, StateText          string
	Since, RetryAfter         string
	Probe                     string // half-open: whether the probe is in flight
	OpenedLabel, OpenedBy     string // not closed: what made it leave closed
	Paused                    string // not closed: why the counts below stand still
	Consecutive, Failures     int
	Window, Rate, Threshold   string
	WindowCalls, MinimumCalls int
	Opens                     uint64
	Timeline                  template.HTML
	Transitions               []string
}

type budgetView struct {
	Retries, Denied uint64
	Tokens          string
	Chart           template.HTML
}

func (h *Handler) build(ctx context.Context) view {
	now := h.src.Now()
	res := h.runReady(ctx)
	v := view{
		Service: h.src.Service, Env: h.src.Env, Base: "/status", At: now.UTC().Format("15:04:05 UTC"), Verdict: res.Status,
		PollEvery: PollEvery.Milliseconds(), PollTimeout: h.src.PollTimeout.Milliseconds(),
	}
	if v.Service == "" {
		v.Service = "service"
	}
	plugins := map[string]*pluginView{}
	var order []string
	get := func(name string) *pluginView {
		if p, ok := plugins[name]; ok {
			return p
		}
		plugins[name] = &pluginView{Name: name}
		order = append(order, name)
		return plugins[name]
	}
	names := make([]string, 0, len(res.Checks))
	for name := range res.Checks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rep := res.Checks[name]
		rep.Detail = h.src.Mask(rep.Detail)
		p := get(name)
		p.Report = &rep
		if q := queueOf(rep.Meta); q != nil {
			p.Queue = q
		}
	}
	traffic := h.traffic.read(now)
	carded := map[trafficKey]bool{}
	for _, d := range h.src.Registry.Snapshot() {
		p := get(d.Owner)
		dv := depView{ID: idOf(d.Owner + "-" + d.Name), Name: d.Name, Bulkhead: d.Bulkhead}
		if b := d.Breaker; b != nil {
			dv.Breaker = breakerOf(b, now)
		}
		if b := d.Budget; b != nil {
			bv := &budgetView{Retries: b.Retries, Denied: b.Denied, Chart: retryChart(b.Minutes)}
			if b.Tokens > 0 {
				bv.Tokens = strconv.FormatFloat(b.Tokens, 'f', 1, 64)
			}
			dv.Budget = bv
		}
		k := trafficKey{d.Owner, d.Name}
		carded[k] = true
		dv.Traffic = trafficOf(traffic, k)
		p.Deps = append(p.Deps, dv)
	}
	// Dependencies the metrics name and no resilience object does (a
	// gateway route, a mail transport, a channel) get a card of their own
	// in their plugin's section.
	var rest []trafficKey
	for k := range traffic {
		if !carded[k] {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, func(a, b trafficKey) int { return strings.Compare(a.owner+"\x00"+a.name, b.owner+"\x00"+b.name) })
	for _, k := range rest {
		t := traffic[k]
		p := get(k.owner)
		p.Deps = append(p.Deps, depView{ID: idOf(k.owner + "-" + k.name), Name: cmp.Or(k.name, k.owner), Traffic: &t})
	}
	for _, name := range order {
		p := plugins[name]
		slices.SortStableFunc(p.Deps, func(a, b depView) int { return cmp.Compare(rankDep(a), rankDep(b)) })
		p.rank = rankPlugin(p)
		v.Plugins = append(v.Plugins, *p)
	}
	// What is failing comes first: the verdict names it, and its sections
	// and cards lead the page.
	slices.SortStableFunc(v.Plugins, func(a, b pluginView) int { return cmp.Compare(a.rank, b.rank) })
	for _, p := range v.Plugins {
		if f, ok := failingOf(p); ok {
			v.Failing = append(v.Failing, f)
		}
	}
	v.Drill = readDrill(h.src.DrillReport)
	v.Front = frontDoorOf(h.src.FrontDoor)
	return v
}

// rankDep orders a plugin's cards: breakers open, then half-open, then the
// rest in the registry's order.
func rankDep(d depView) int {
	if d.Breaker == nil {
		return 2
	}
	switch d.Breaker.State {
	case resilience.StateOpen.String():
		return 0
	case resilience.StateHalfOpen.String():
		return 1
	}
	return 2
}

// rankPlugin orders the sections: a failing check declared critical, a
// failing check, a passing one with a breaker not closed (a shared client's
// host, which never fails the check), then the rest.
func rankPlugin(p *pluginView) int {
	switch {
	case p.Report != nil && p.Report.Status != readiness.Pass && p.Report.Critical:
		return 0
	case p.Report != nil && p.Report.Status != readiness.Pass:
		return 1
	case len(p.Deps) > 0 && rankDep(p.Deps[0]) < 2:
		return 2
	}
	return 3
}

// failingOf names what fails in p for the verdict, reporting false when
// nothing does.
func failingOf(p pluginView) (failingView, bool) {
	f := failingView{Name: p.Name}
	if p.Report != nil && p.Report.Status == readiness.Timeout {
		f.Status = "check timed out"
	} else if p.Report != nil && p.Report.Status != readiness.Pass {
		f.Status = "check failed"
	}
	for _, d := range p.Deps {
		if rankDep(d) < 2 {
			f.Deps = append(f.Deps, failingDep{ID: d.ID, Name: d.Name, State: "breaker " + d.Breaker.StateText})
		}
	}
	return f, f.Status != "" || len(f.Deps) > 0
}

// trafficOf returns the traffic of dependency k: its metrics, or why it has
// none. A breaker of one of an http or grpc client's routes, instances or
// origins ("billing /payments/{id}", "orders 10.0.0.7:8000", "webhooks
// https://hooks.example:443") is counted with its client, named first.
func trafficOf(traffic map[trafficKey]trafficView, k trafficKey) *trafficView {
	if t, ok := traffic[k]; ok {
		return &t
	}
	if up, part, ok := strings.Cut(k.name, " "); ok && (k.owner == "http" || k.owner == "grpc") {
		what, per := "upstream", "instance"
		switch {
		case strings.HasPrefix(part, "/"):
			per = "route"
		case strings.Contains(part, "://"):
			what, per = "client", "origin" // a shared client's
		}
		return &trafficView{Calls: "—", Attempts: "—", P50: "—", P99: "—",
			NotMeasured: "counted with its " + what + ", " + up + ": the metrics are kept per " + what + ", not per " + per}
	}
	return noTraffic(k.owner)
}

// queueOf reads the queue plugin's depth and dead-letter count from its
// /ready meta (the mail plugin's dead letters too), or nil when the meta has
// neither. A depth per queue (a map) is listed queue by queue.
func queueOf(meta map[string]any) *queueView {
	depth, okDepth := meta["depth"]
	dead, okDead := meta["dead"]
	if !okDepth && !okDead {
		return nil
	}
	q := &queueView{}
	if okDepth {
		q.Depth = countText(depth)
	}
	if okDead {
		q.Dead = countText(dead)
	}
	return q
}

// countText renders a count, or counts by name ("default: 3, mail: 0").
func countText(v any) string {
	switch m := v.(type) {
	case nil:
		return "—"
	case map[string]int:
		return namedCounts(m)
	case map[string]int64:
		return namedCounts(m)
	case map[string]any:
		return namedCounts(m)
	}
	return fmt.Sprint(v)
}

func namedCounts[V any](m map[string]V) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %v", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func breakerOf(b *resilience.BreakerView, now time.Time) *breakerView {
	bv := &breakerView{
		State: b.State.String(), StateText: stateText(b.State), Since: ago(now, b.Since),
		Consecutive: b.Consecutive, Failures: b.Failures,
		Window: durationText(b.Window),
		Rate:   percent(b.WindowFailureRate()), Threshold: percent(b.FailureRate),
		WindowCalls: b.WindowCalls, MinimumCalls: b.MinimumCalls, Opens: b.Opens,
		Timeline: timeline(b.Created, b.Initial, b.State, b.Transitions, now),
	}
	if b.RetryAfter > 0 {
		bv.RetryAfter = durationText(b.RetryAfter)
	}
	switch b.State {
	case resilience.StateOpen:
		bv.Paused = "these counts restarted when it opened and stand still while it is open"
	case resilience.StateHalfOpen:
		bv.Paused = "these counts stand still while it is half-open: the probe call decides"
		bv.Probe = "waiting for the next call to probe"
		if b.Probing {
			bv.Probe = "a probe call is in flight"
		}
	}
	if b.State != resilience.StateClosed && b.Tripped != nil {
		bv.OpenedLabel, bv.OpenedBy = trippedBy(b)
	}
	for i := len(b.Transitions) - 1; i >= 0; i-- {
		t := b.Transitions[i]
		s := t.At.UTC().Format("15:04:05") + " " + stateText(t.From) + " → " + stateText(t.To)
		if t.Hang {
			s += " (no answer within its deadline)"
		}
		bv.Transitions = append(bv.Transitions, s)
	}
	return bv
}

// stateText is a breaker's state as the page writes it.
func stateText(s resilience.State) string {
	if s == resilience.StateHalfOpen {
		return "half-open"
	}
	return s.String()
}

// trippedBy says what made a breaker that is not closed leave closed: the
// failures that opened it (which its own counts, reset by the opening, no
// longer hold), and a probe that failed since.
func trippedBy(b *resilience.BreakerView) (label, text string) {
	t := b.Tripped
	at := t.At.UTC().Format("15:04:05")
	if t.To == resilience.StateHalfOpen {
		return "half-open since " + at + " by", "a call that got no answer within its deadline while nothing else answered"
	}
	label, text = "opened at "+at+" by", rateText(t, b)
	if t.Consecutive >= b.Failures {
		text = fmt.Sprintf("%d consecutive failures (opens at %d)", t.Consecutive, b.Failures)
	}
	if t.Hang {
		text += ", the last with no answer within its deadline"
	}
	if b.State == resilience.StateOpen && b.Since.After(t.At) {
		probe := "the probe call failed"
		if n := len(b.Transitions); n > 0 && b.Transitions[n-1].To == resilience.StateOpen && b.Transitions[n-1].Hang {
			probe = "the probe call got no answer within its deadline"
		}
		label, text = "reopened at "+b.Since.UTC().Format("15:04:05")+":", probe+"; first "+label+" "+text
	}
	return label, text
}

// rateText is the failure-rate rule's reading when t opened the breaker.
func rateText(t *resilience.StateChange, b *resilience.BreakerView) string {
	rate := 0.0
	if t.WindowCalls > 0 {
		rate = float64(t.WindowFailures) / float64(t.WindowCalls)
	}
	return fmt.Sprintf("%d failures in %d calls within %s, %s (opens at %s of ≥ %d)",
		t.WindowFailures, t.WindowCalls, durationText(b.Window), percent(rate), percent(b.FailureRate), b.MinimumCalls)
}

// ago renders t as a wall time and how long before now it was. A t after
// now is "0s ago", not "-0s ago": reading the breakers after now was read
// can itself move one (an open breaker whose cool-down ended turns
// half-open when asked), at a later reading of the clock.
func ago(now, t time.Time) string {
	return t.UTC().Format("15:04:05") + " (" + durationText(max(now.Sub(t), 0)) + " ago)"
}

// durationText renders d to a tenth of a second below a minute, else to
// the second.
func durationText(d time.Duration) string {
	if d < time.Minute {
		return strconv.FormatFloat(math.Round(d.Seconds()*10)/10, 'f', -1, 64) + "s"
	}
	return d.Round(time.Second).String()
}

func percent(f float64) string { return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + " %" }

// idOf makes an HTML id of a dependency's name (which may hold spaces,
// slashes and an origin).
func idOf(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
