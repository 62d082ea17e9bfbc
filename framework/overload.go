package framework

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/statuspage"
	"github.com/jfastframework/jfast/problem"
)

// OverloadConfig is the [app.overload] table: the front door's adaptive
// concurrency limit (docs/overload.md). It is on by default; /live, /ready,
// /metrics and the admin routes are never limited.
type OverloadConfig struct {
	// Enabled turns the limit on. Defaults to true.
	Enabled bool `koanf:"enabled"`

	// InitialLimit is the limit at boot, before any latency was measured.
	// Defaults to 20.
	InitialLimit int `koanf:"initial_limit"`

	// MinLimit is the lowest the limit goes, however slow requests get.
	// Defaults to 2.
	MinLimit int `koanf:"min_limit"`

	// MaxLimit is the highest the limit goes, however fast requests are.
	// Defaults to 1000.
	MaxLimit int `koanf:"max_limit"`

	// Tolerance is how far the mean latency may rise above the baseline
	// before the limit shrinks: 1.5 lets a window's mean be 1.5 × the
	// lowest mean of the last baseline_window. Defaults to 1.5.
	Tolerance float64 `koanf:"tolerance"`

	// MaxCPUWait is the longest goroutines may wait for a CPU (the Go
	// scheduler's p99 over a window) before the limit shrinks: a request
	// waits there before the framework sees it, so the requests' own
	// latency cannot show it. Defaults to 10ms.
	MaxCPUWait time.Duration `koanf:"max_cpu_wait"`

	// Window is how often the limit moves: each window's mean latency (of at
	// least 10 requests) is compared with the baseline. Defaults to 100ms.
	Window time.Duration `koanf:"window"`

	// BaselineWindow is how far back the baseline (the lowest window mean)
	// looks, so a service whose dependencies became slower for good finds
	// its new baseline. Defaults to 30s.
	BaselineWindow time.Duration `koanf:"baseline_window"`

	// Queue is how many requests may wait for a slot; more are shed at
	// once. 0 sheds every request over the limit. Defaults to 50.
	Queue int `koanf:"queue"`

	// QueueTimeout is the longest a request waits for a slot before it is
	// shed. Defaults to 50ms.
	QueueTimeout time.Duration `koanf:"queue_timeout"`

	// RetryAfter is the Retry-After a shed request is answered with.
	// Defaults to 1s.
	RetryAfter time.Duration `koanf:"retry_after"`

	// Critical lists the routes that shed last ("POST /orders", or a route
	// pattern for every method: "/checkout/{id}"). Defaults to none.
	Critical []string `koanf:"critical"`

	// Sheddable lists the routes that shed first. Defaults to none.
	Sheddable []string `koanf:"sheddable"`

	// Exempt lists the routes that are never limited (a long poll that
	// does not call framework.StreamContext). Defaults to none.
	Exempt []string `koanf:"exempt"`
}

// DefaultOverloadConfig returns the [app.overload] defaults.
func DefaultOverloadConfig() OverloadConfig {
	return OverloadConfig{
		Enabled:        true,
		InitialLimit:   20,
		MinLimit:       2,
		MaxLimit:       1000,
		Tolerance:      1.5,
		MaxCPUWait:     10 * time.Millisecond,
		Window:         100 * time.Millisecond,
		BaselineWindow: 30 * time.Second,
		Queue:          50,
		QueueTimeout:   50 * time.Millisecond,
		RetryAfter:     time.Second,
	}
}

func (c OverloadConfig) validate(v *Validation) {
	const k = "overload."
	if c.MinLimit < 1 {
		v.Error(k+"min_limit", fmt.Sprintf("must be at least 1, got %d", c.MinLimit), "set min_limit = 2")
	}
	if c.MaxLimit < c.MinLimit {
		v.Error(k+"max_limit", fmt.Sprintf("must be at least min_limit (%d), got %d", c.MinLimit, c.MaxLimit), "set max_limit = 1000")
	}
	// With min_limit over max_limit no initial_limit fits: max_limit's error
	// says what to change. Otherwise the fix offered is a value that fits,
	// the default's nearest.
	if c.MinLimit >= 1 && c.MinLimit <= c.MaxLimit && (c.InitialLimit < c.MinLimit || c.InitialLimit > c.MaxLimit) {
		v.Error(k+"initial_limit", fmt.Sprintf("must be from min_limit (%d) to max_limit (%d), got %d", c.MinLimit, c.MaxLimit, c.InitialLimit),
			fmt.Sprintf("set initial_limit = %d", min(max(DefaultOverloadConfig().InitialLimit, c.MinLimit), c.MaxLimit)))
	}
	if !(c.Tolerance >= 1 && c.Tolerance <= 10) {
		v.Error(k+"tolerance", fmt.Sprintf("must be from 1 to 10, got %g", c.Tolerance), "set tolerance = 1.5 (latency may rise by half before the limit shrinks)")
	}
	v.Span(k+"max_cpu_wait", c.MaxCPUWait, "10ms")
	v.Span(k+"window", c.Window, "100ms")
	v.Span(k+"baseline_window", c.BaselineWindow, "30s")
	if c.Window > 0 && c.BaselineWindow < 10*c.Window {
		v.Error(k+"baseline_window", fmt.Sprintf("must be at least 10 windows (%s), got %s", 10*c.Window, c.BaselineWindow), `set baseline_window = "30s"`)
	}
	if c.Queue < 0 {
		v.Error(k+"queue", fmt.Sprintf("must be 0 or more, got %d", c.Queue), "set queue = 50 (0 sheds every request over the limit at once)")
	}
	v.Span(k+"queue_timeout", c.QueueTimeout, "50ms")
	if c.RetryAfter < time.Second {
		v.Error(k+"retry_after", fmt.Sprintf("must be at least 1s (Retry-After is whole seconds), got %s", c.RetryAfter), `set retry_after = "1s"`)
	}
	// Entries are compared as the front door reads them, not as written:
	// "GET  /a" is "GET /a". A pattern alone is every method, so "/a" in one
	// list and "GET /a" in another say two things about GET /a; which one
	// should win is a guess about what was meant, so the boot is refused.
	type entry struct{ key, route, method, pattern string }
	var entries []entry
	for _, list := range []struct {
		key    string
		routes []string
	}{{"critical", c.Critical}, {"sheddable", c.Sheddable}, {"exempt", c.Exempt}} {
		for _, route := range list.routes {
			method, pattern, err := parseRoute(route)
			if err != "" {
				v.Error(k+list.key, fmt.Sprintf("%q %s", route, err), `write "POST /orders", or "/orders/{id}" for every method`)
				continue
			}
			e := entry{list.key, route, method, strings.ReplaceAll(pattern, "/*/", "/")}
			for _, o := range entries {
				if o.key == e.key || o.pattern != e.pattern || (o.method != e.method && o.method != "" && e.method != "") {
					continue
				}
				v.Error(k+e.key, routeOverlap(e.route, e.method, o.route, o.method, "app."+k+o.key),
					`give each route one class; a pattern alone is every method, so to class one method apart list the others one by one ("POST /orders")`)
				break
			}
			entries = append(entries, e)
		}
	}
}

// routeOverlap says why route (of method, "" for every method) is in two
// lists: the other, of otherMethod, is under otherKey.
func routeOverlap(route, method, other, otherMethod, otherKey string) string {
	switch {
	case method == otherMethod && route == other:
		return fmt.Sprintf("%q is also in %s", route, otherKey)
	case method == otherMethod:
		return fmt.Sprintf("%q is also in %s, written %q", route, otherKey, other)
	case otherMethod == "":
		return fmt.Sprintf("%q is also in %s, whose %q is every method", route, otherKey, other)
	default:
		return fmt.Sprintf("%q is every method, %q among them, which is in %s", route, other, otherKey)
	}
}

// parseRoute splits "POST /orders" into its method and pattern, or returns
// what is wrong with it.
func parseRoute(s string) (method, pattern, problem string) {
	method, pattern, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		method, pattern = "", method
	}
	pattern = strings.TrimSpace(pattern)
	if method != "" && !StandardMethod(method) {
		return "", "", "has an unknown method " + method
	}
	if !strings.HasPrefix(pattern, "/") {
		return "", "", "is not a route pattern starting with /"
	}
	return method, pattern, ""
}

// WithPriority gives h's route the priority class p in the front door's
// queue, as listing it in [app.overload] critical, sheddable or exempt
// would (the file wins when both say). Use it on the handler given to the
// router: r.With(auth).Method(http.MethodPost, "/checkout", framework.WithPriority(framework.PriorityCritical, h)).
func WithPriority(p Priority, h http.Handler) http.Handler {
	return &prioritized{Handler: h, class: p}
}

type prioritized struct {
	http.Handler
	class Priority
}

// Overload returns the front door's limiter, shared by HTTP and gRPC
// serving, or nil when app.overload.enabled is false.
func (a *App) Overload() *Limiter { return a.limiter }

// frontDoor is the limiter as serveRequest uses it: which class a request
// is, and how a shed request is answered.
type frontDoor struct {
	limiter *Limiter
	mux     *chi.Mux
	// static: every listed pattern is a plain path, so a request's class is
	// a lookup of its path; else the router finds its pattern first.
	static bool
	// layers are the classes by who gave them, looked up in this order:
	// the framework's exempt routes, the file's lists, WithPriority.
	layers [3]classes
	log    *slog.Logger
	// shed counts the requests shed since the last "requests shed" line,
	// logged (unix nanoseconds): at most one INFO line a second, however
	// many are shed, instead of an access log line each. last is the last
	// one's reason and status, for a line that counts those held back.
	shed, logged atomic.Int64
	last         atomic.Pointer[shedNote]
}

// shedNote is the reason a request was shed and its status.
type shedNote struct {
	reason string
	status int
}

// shedNotes are the notes of the front door's reasons, so that noting one
// allocates nothing.
var shedNotes = [...]shedNote{
	{ShedQueueFull, http.StatusServiceUnavailable},
	{ShedQueueTimeout, http.StatusServiceUnavailable},
	{ShedClientGone, StatusClientClosedRequest},
}

func noteOf(reason string, status int) *shedNote {
	for i := range shedNotes {
		if shedNotes[i] == (shedNote{reason, status}) {
			return &shedNotes[i]
		}
	}
	return &shedNote{reason, status}
}

type methodRoute struct{ method, route string }

// classes are the priority classes one source gave routes: by method and
// pattern ("POST /orders/{id}"), and by pattern alone for every method.
type classes struct {
	byMethod map[methodRoute]Priority
	byRoute  map[string]Priority
}

// of is the class of a request of method whose route is pattern, the
// method's own before the pattern's.
func (c *classes) of(method, pattern string) (Priority, bool) {
	if p, ok := c.byMethod[methodRoute{method, pattern}]; ok {
		return p, true
	}
	p, ok := c.byRoute[pattern]
	return p, ok
}

// Who gave a route its class, in the order the front door asks.
const (
	layerFramework = iota // /live, /ready, the admin routes: never limited
	layerFile             // [app.overload] critical, sheddable, exempt
	layerCode             // WithPriority
)

// newFrontDoor builds the front door of mux: exempt are the routes that
// are never limited (/live, /ready, admin routes on the public listener),
// whatever else says; then the file's classes, which win over those
// WithPriority gave, a pattern alone as well as a method and pattern.
func newFrontDoor(l *Limiter, mux *chi.Mux, cfg OverloadConfig, exempt []string, log *slog.Logger) (*frontDoor, error) {
	f := &frontDoor{limiter: l, mux: mux, static: true, log: log}
	for i := range f.layers {
		f.layers[i] = classes{byMethod: map[methodRoute]Priority{}, byRoute: map[string]Priority{}}
	}
	set := func(layer int, route string, p Priority) {
		method, pattern, _ := parseRoute(route)
		pattern = strings.ReplaceAll(pattern, "/*/", "/")
		if strings.ContainsAny(pattern, "{*") {
			f.static = false
		}
		if method == "" {
			f.layers[layer].byRoute[pattern] = p
		} else {
			f.layers[layer].byMethod[methodRoute{method, pattern}] = p
		}
	}
	known := map[string]bool{}
	err := chi.Walk(mux, func(method, route string, h http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.ReplaceAll(route, "/*/", "/")
		known[route], known[method+" "+route] = true, true
		if p, ok := h.(*prioritized); ok {
			set(layerCode, method+" "+route, p.class)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, list := range []struct {
		key    string
		routes []string
		class  Priority
	}{{"critical", cfg.Critical, PriorityCritical}, {"sheddable", cfg.Sheddable, PrioritySheddable}, {"exempt", cfg.Exempt, PriorityExempt}} {
		for _, route := range list.routes {
			method, pattern, _ := parseRoute(route)
			if !known[strings.TrimSpace(method+" "+pattern)] {
				return nil, ConfigErrors{{Key: "app.overload." + list.key, Problem: fmt.Sprintf("%q matches no route the service mounts", route), Fix: "write a route pattern as the router has it, e.g. \"POST /orders/{id}\""}}
			}
			set(layerFile, route, list.class)
		}
	}
	for _, route := range exempt {
		set(layerFramework, route, PriorityExempt)
	}
	// A route a subrouter mounts at its root ("/grp/", r.Route("/grp", ...)
	// with r.Get("/", ...)) also serves the path without the slash, which
	// the router finds as "/grp": the class goes with it, unless "/grp" is
	// a route of its own.
	for i := range f.layers {
		l := &f.layers[i]
		for mr, p := range l.byMethod {
			if bare, ok := strings.CutSuffix(mr.route, "/"); ok && bare != "" && !known[mr.method+" "+bare] {
				if _, had := l.byMethod[methodRoute{mr.method, bare}]; !had {
					l.byMethod[methodRoute{mr.method, bare}] = p
				}
			}
		}
		for route, p := range l.byRoute {
			if bare, ok := strings.CutSuffix(route, "/"); ok && bare != "" && !known[bare] {
				if _, had := l.byRoute[bare]; !had {
					l.byRoute[bare] = p
				}
			}
		}
	}
	return f, nil
}

// class is the request's priority class, found from the path the router
// routes on, as chi does: the path left to route when the App is mounted
// under another router, else the escaped path as the client sent it when it
// has escapes net/http would not write (/liv%65). So a request is classed by
// the route that will serve it, never by a route it only decodes to.
func (f *frontDoor) class(r *http.Request) Priority {
	path := r.URL.Path
	if r.URL.RawPath != "" {
		path = r.URL.RawPath
	}
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath != "" {
		// The App mounted under another router: the path left to route.
		path = rctx.RoutePath
	}
	pattern := path
	if !f.static {
		rctx := routePool.Get().(*chi.Context)
		rctx.Reset()
		pattern = f.mux.Find(rctx, r.Method, path)
		routePool.Put(rctx)
	}
	for i := range f.layers {
		if p, ok := f.layers[i].of(r.Method, pattern); ok {
			return p
		}
	}
	return PriorityNormal
}

// admit waits for the request's slot. When it is shed, admit answers it (a
// 503 with Retry-After, or a 499 for a client that went away while it
// waited) and returns false. Either way the front door gave up on it, so it
// is logged as shed, not in the access log.
func (f *frontDoor) admit(w *ResponseRecorder, r *http.Request, held *heldPermit) bool {
	class := f.class(r)
	p, err := f.limiter.Acquire(r.Context(), class)
	if err == nil {
		held.hold(p)
		if f.shed.Load() != 0 {
			f.logHeldBack(r)
		}
		return true
	}
	var shed *ShedError
	errors.As(err, &shed)
	w.quiet = true
	if shed.Reason == ShedClientGone {
		f.logShed(r, shed.Reason, class, StatusClientClosedRequest)
		clientGone(w, r)
		return false
	}
	f.logShed(r, shed.Reason, class, http.StatusServiceUnavailable)
	closeUnread(w, r)
	problem.Write(w, r, shed.Problem())
	return false
}

// shedLogEvery is the most often the front door logs the requests it shed.
const shedLogEvery = time.Second

// logShed logs a shed request, answered status: at DEBUG each one, at INFO
// a count at most once every shedLogEvery, with the last one's reason and
// status. Under overload a service sheds most of what it is offered, and an
// access log line each would spend the CPU (and the log pipeline) the
// shedding is there to save.
func (f *frontDoor) logShed(r *http.Request, reason string, class Priority, status int) {
	f.log.LogAttrs(r.Context(), slog.LevelDebug, "request shed",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.String("reason", reason), slog.String("class", class.String()))
	f.last.Store(noteOf(reason, status))
	f.shed.Add(1)
	f.logHeldBack(r)
}

// logHeldBack writes the "requests shed" line of the requests shed since
// the last one, when that was shedLogEvery ago or more. A shed request
// calls it, and so does every request the front door admits while some are
// held back (one atomic load otherwise): the count of a burst's last ones
// is logged by the first request, a health probe included, that comes a
// second after the line before, not by the next burst, which may be hours
// away.
func (f *frontDoor) logHeldBack(r *http.Request) {
	now := f.limiter.clock.Now().UnixNano()
	last := f.logged.Load()
	if now-last < int64(shedLogEvery) || !f.logged.CompareAndSwap(last, now) {
		return
	}
	n := f.shed.Swap(0)
	if n == 0 {
		return
	}
	note := f.last.Load()
	f.log.LogAttrs(r.Context(), slog.LevelInfo, "requests shed",
		slog.Int64("count", n), slog.String("reason", note.reason),
		slog.Int("limit", f.limiter.Limit()), slog.Int("status", note.status))
}

// heldPermit is the Permit of the request being served, released once: when
// the request ends, or earlier when its handler asks for StreamContext (a
// response that streams is not work the limit should wait for).
type heldPermit struct {
	p    Permit
	held atomic.Bool
}

func (h *heldPermit) hold(p Permit) {
	h.p = p
	h.held.Store(true)
}

// release frees the slot, with the request's latency when sample is true.
func (h *heldPermit) release(sample bool) {
	if !h.held.CompareAndSwap(true, false) {
		return
	}
	if sample {
		h.p.Release()
	} else {
		h.p.Abandon()
	}
}

// StatusClientClosedRequest is the status a request whose client went away
// is logged and counted with (nginx's 499): no response reached anyone, so
// it is neither the service's error (500) nor a success.
const StatusClientClosedRequest = 499

// clientLeft reports whether r's context ended because the client went
// away: cancelled, not by the request's deadline nor by a shutdown.
func clientLeft(r *http.Request) bool {
	ctx := r.Context()
	return errors.Is(ctx.Err(), context.Canceled) && !errors.Is(context.Cause(ctx), errShutdown)
}

// clientGone records a 499 on w: the status line goes to a connection that
// is most likely closed already, and the access log and metrics see 499.
func clientGone(w http.ResponseWriter, r *http.Request) {
	if rec := recorderOf(w); rec != nil && rec.Started() {
		return
	}
	w.WriteHeader(StatusClientClosedRequest)
}

// limiterCollector exports the Limiter's state as jfast_overload_* metrics.
type limiterCollector struct {
	l                       *Limiter
	limit, inflight, queued *prometheus.Desc
	baseline, recent, shed  *prometheus.Desc
	cpuWait, spare          *prometheus.Desc
	wait                    prometheus.Histogram
}

func newLimiterCollector(l *Limiter) *limiterCollector {
	c := &limiterCollector{
		l:        l,
		limit:    prometheus.NewDesc("jfast_overload_limit", "The front door's concurrency limit now.", nil, nil),
		inflight: prometheus.NewDesc("jfast_overload_inflight", "Requests admitted by the front door and not yet finished, including hung ones that no longer count against the limit.", nil, nil),
		queued:   prometheus.NewDesc("jfast_overload_queued", "Requests waiting for a slot.", nil, nil),
		baseline: prometheus.NewDesc("jfast_overload_latency_baseline_seconds", "The lowest window mean latency of the last baseline_window.", nil, nil),
		recent:   prometheus.NewDesc("jfast_overload_latency_recent_seconds", "The last window's mean latency.", nil, nil),
		cpuWait:  prometheus.NewDesc("jfast_overload_cpu_wait_seconds", "The last window's p99 wait of goroutines for a CPU (the Go scheduler's).", nil, nil),
		spare:    prometheus.NewDesc("jfast_overload_spare_total", "Requests admitted one over the limit, into the spare slot, while no goroutine waited for a CPU.", nil, nil),
		shed:     prometheus.NewDesc("jfast_overload_shed_total", "Requests turned away by the front door, by reason and priority class (client_gone ones are answered 499, the others 503).", []string{"reason", "class"}, nil),
		wait: NewHistogram("jfast_overload_queue_wait_seconds",
			"Time requests waited in the front door's queue (those that queued), admitted or shed.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}),
	}
	l.mu.Lock()
	l.onWait = func(d time.Duration) { c.wait.Observe(d.Seconds()) }
	l.mu.Unlock()
	return c
}

func (c *limiterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.limit, c.inflight, c.queued, c.baseline, c.recent, c.cpuWait, c.spare, c.shed} {
		ch <- d
	}
	c.wait.Describe(ch)
}

func (c *limiterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.State()
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(s.Limit))
	ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.baseline, prometheus.GaugeValue, s.Baseline.Seconds())
	ch <- prometheus.MustNewConstMetric(c.recent, prometheus.GaugeValue, s.Recent.Seconds())
	ch <- prometheus.MustNewConstMetric(c.cpuWait, prometheus.GaugeValue, s.CPUWait.Seconds())
	ch <- prometheus.MustNewConstMetric(c.spare, prometheus.CounterValue, float64(s.Spare))
	for reason, byClass := range s.Shed {
		for class, n := range byClass {
			ch <- prometheus.MustNewConstMetric(c.shed, prometheus.CounterValue, float64(n), reason, class)
		}
	}
	c.wait.Collect(ch)
}

// frontDoorReading is the status page's reading of the limiter, or nil
// without one.
func (a *App) frontDoorReading() func() *statuspage.FrontDoor {
	if a.limiter == nil {
		return nil
	}
	return func() *statuspage.FrontDoor {
		s := a.limiter.State()
		shed := map[string]uint64{}
		for reason, byClass := range s.Shed {
			for _, n := range byClass {
				shed[reason] += n
			}
		}
		return &statuspage.FrontDoor{Limit: s.Limit, InFlight: s.InFlight, Queued: s.Queued,
			Baseline: s.Baseline, Recent: s.Recent, CPUWait: s.CPUWait, Shed: shed}
	}
}
