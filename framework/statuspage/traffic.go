package statuspage

import (
	"cmp"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Calls, attempts and latency come from the metrics the plugins keep for
// /metrics (counters and a latency histogram per dependency), nothing else:
// nothing is measured twice. "Over the last minutes" is the difference
// between the reading taken at render and an earlier one kept in a ring of
// readings, one every sampleEvery, for trafficSpan.
//
// The ring is filled while nobody looks, on the calls' own path: the
// resilience Registry's OnTick runs the page's sample when a call through
// one of the service's breakers finds one due (every sampleEvery, only while
// calls are made). The call starts a goroutine that gathers the registry and
// keeps the traffic families; it does not wait for it. See docs/status.md,
// "What it costs".
//
// A reading a call takes already counts that call, so it cannot be the base
// of a window that should count it. Two rules keep such a call in the
// window: the first reading is all zeros, what every counter held before
// the first call, stamped with the time the page is made (as the App
// starts), so the calls before the first reading are counted "since
// start"; and a reading
// stays the base past the window's length while the next one came after a
// quiet spell (more than two sampleEvery later: a tick found no call), since
// that next one counts the call that ended the spell.

const (
	trafficSpan = 5 * time.Minute
	sampleEvery = 10 * time.Second
	// keepFor is how old a reading may be and still be the base on its own
	// terms: trafficSpan and one reading's interval.
	keepFor = trafficSpan + sampleEvery
	// maxSamples is the ring's size: the readings keepFor holds (one per
	// sampleEvery at most, both ends included: 32) and the one before them,
	// the base when a quiet spell came between.
	maxSamples = int(keepFor/sampleEvery) + 2
	// quietSpell is the gap between two readings that says no call came
	// between them for at least one sampleEvery: readings follow each other
	// within two intervals while calls are made (one is due at each
	// multiple of sampleEvery, and one due less than sampleEvery after the
	// last kept is skipped).
	quietSpell = 2 * sampleEvery
)

// term is one counter family summed into calls or attempts, with a sign, and
// optionally only the series whose label only has the value is. label, when
// set, names the dependency in this family instead of the source's label.
type term struct {
	family   string
	sign     float64
	only, is string
	label    string
}

// source is where one plugin keeps its calls, attempts and latency.
type source struct {
	owner string
	// label names the dependency in every family; "" sums every series
	// into the one dependency dep("") names.
	label string
	// dep maps the label's value to the dependency's name in the
	// resilience Registry (its card); nil keeps it.
	dep func(string) string
	// calls and attempts are sums of counters; nil is not measured.
	calls, attempts []term
	// duration is the latency histogram; "" is not measured.
	duration string
	// notMeasured says why calls, attempts or latency are missing.
	notMeasured string
}

func plus(family string) term  { return term{family: family, sign: 1} }
func minus(family string) term { return term{family: family, sign: -1} }

// except is every series of family but those whose label only has the
// value is: the calls or attempts a family counts, less those it counts
// but that sent nothing (refused by an open breaker, too large) or were
// not calls of their own (an enqueue's second attempt).
func except(family, only, is string) []term {
	return []term{plus(family), {family: family, sign: -1, only: only, is: is}}
}

// policy is one of the policy families every client plugin shares
// (framework.ClientMetrics), for plugin's series.
func policy(family, plugin string) term {
	return term{family: family, sign: 1, only: "plugin", is: plugin, label: "dependency"}
}

// sources is every built-in plugin that makes outbound calls.
var sources = []source{
	{
		owner: "http", label: "upstream",
		calls:    []term{policy("jfast_client_calls_total", "http")},
		attempts: []term{policy("jfast_client_attempts_total", "http")},
		duration: "jfast_http_client_call_duration_seconds",
	},
	{
		owner: "grpc", label: "upstream",
		calls:    []term{policy("jfast_client_calls_total", "grpc")},
		attempts: []term{policy("jfast_client_attempts_total", "grpc")},
		duration: "jfast_grpc_client_call_duration_seconds",
	},
	{
		owner: "llm", label: "provider",
		calls:    []term{policy("jfast_client_calls_total", "llm")},
		attempts: []term{policy("jfast_client_attempts_total", "llm")},
		duration: "jfast_llm_call_duration_seconds",
	},
	{
		// A gateway route has no card of its own (its upstream's is the
		// http plugin's): the page gives it one in the gateway's section.
		owner: "gateway", label: "route",
		calls: []term{plus("jfast_gateway_requests_total")},
		// Each request proxied is one attempt and its retries more; one
		// its upstream's open breaker refused made none.
		attempts: []term{plus("jfast_gateway_requests_total"), minus("jfast_gateway_breaker_refusals_total"), plus("jfast_gateway_retries_total")},
		duration: "jfast_gateway_upstream_duration_seconds",
	},
	{
		owner: "storage", label: "disk",
		dep:   func(disk string) string { return "storage." + disk },
		calls: []term{plus("jfast_storage_operations_total")},
		// Every request the disk's policy sent: each try of each S3
		// request (a multipart upload makes several per operation).
		attempts: []term{policy("jfast_client_attempts_total", "storage")},
		duration: "jfast_storage_operation_duration_seconds",
	},
	{
		owner: "auth", dep: func(string) string { return "jwks" },
		calls:    []term{plus("jfast_auth_jwks_fetches_total")},
		attempts: except("jfast_auth_jwks_fetches_total", "result", "circuit_open"),
		duration: "jfast_auth_jwks_fetch_duration_seconds",
	},
	{
		// An enqueue is one call; "retried" counts its second attempt,
		// "circuit_open" one refused with no I/O (by the queue's breaker or
		// the db's or cache's) and "invalid" one refused at the call (a bad
		// kind, payload or option), which sent nothing either.
		owner: "queue", dep: func(string) string { return "queue" },
		calls: except("jfast_queue_enqueued_total", "outcome", "retried"),
		attempts: append(except("jfast_queue_enqueued_total", "outcome", "circuit_open"),
			term{family: "jfast_queue_enqueued_total", sign: -1, only: "outcome", is: "invalid"}),
		duration: "jfast_queue_enqueue_duration_seconds",
	},
	{
		// Mail is delivered by the queue's jobs, each one delivery
		// attempt; the plugin holds no breaker, so the page gives each
		// transport a card.
		owner: "mail", label: "transport",
		attempts:    []term{plus("jfast_mail_deliveries_total")},
		duration:    "jfast_mail_delivery_duration_seconds",
		notMeasured: "calls, that is messages: deliveries are counted by attempt (jfast_mail_deliveries_total), not by message",
	},
	{
		// A publish is one Redis command, never retried; one too large,
		// or one the cache's open breaker refused, sent nothing.
		owner: "channels", label: "channel",
		calls: []term{plus("jfast_channels_published_total")},
		attempts: append(except("jfast_channels_published_total", "outcome", "too_large"),
			term{family: "jfast_channels_published_total", sign: -1, only: "outcome", is: "circuit_open"}),
		duration: "jfast_channels_publish_duration_seconds",
	},
	{
		// The db's breaker guards the pool's connections: a call is a
		// connection asked for through the plugin (a statement, or a
		// transaction's), its attempts those the breaker let through, its
		// latency how long it was held.
		owner: "db", dep: func(string) string { return "db" },
		calls:       []term{plus("jfast_db_acquisitions_total")},
		attempts:    []term{plus("jfast_db_acquisition_attempts_total")},
		duration:    "jfast_db_acquisition_duration_seconds",
		notMeasured: "statements one by one, and connections taken from the pool directly (River): a call is a connection asked for through the plugin, and its latency how long it was held, from asking for it to giving it back (a statement's or a whole transaction's time)",
	},
	{
		// A command (or a pipeline) is one call and, go-redis's own
		// retries being off, one attempt unless the open breaker refused
		// it (circuit_open).
		owner: "cache", dep: func(string) string { return "redis" },
		calls:       []term{plus("jfast_cache_commands_total")},
		attempts:    except("jfast_cache_commands_total", "outcome", "circuit_open"),
		duration:    "jfast_cache_command_duration_seconds",
		notMeasured: "pub/sub subscriptions, which are not commands; a pipeline or MULTI/EXEC counts as one call",
	},
}

func sourceOf(owner string) *source {
	for i := range sources {
		if sources[i].owner == owner {
			return &sources[i]
		}
	}
	return nil
}

type trafficKey struct{ owner, name string }

type trafficView struct {
	Calls, Attempts string
	P50, P99        string
	Span            string
	NotMeasured     string
}

// counts is one dependency's cumulative metrics at one moment. buckets are
// cumulative counts at bounds (ascending, +Inf excluded); total includes the
// observations above the last bound.
type counts struct {
	calls, attempts float64
	bounds, buckets []float64
	total           float64
}

type sample struct {
	at   time.Time
	deps map[trafficKey]counts
	// start marks the zero reading of the page's making: a window from it
	// is "since start".
	start bool
}

// traffic keeps the earlier readings.
type traffic struct {
	g prometheus.Gatherer

	mu       sync.Mutex
	samples  []sample  // oldest first, at most maxSamples
	sampling bool      // a sample is being taken
	pending  time.Time // a tick that came while sampling, taken next
	closed   bool
	done     sync.Cond // signalled when the samples end
}

// newTraffic returns the readings of g, the first the zero one of now.
func newTraffic(g prometheus.Gatherer, now time.Time) *traffic {
	t := &traffic{g: g, samples: []sample{{at: now, start: true}}}
	t.done.L = &t.mu
	return t
}

// tick is the resilience Registry's OnTick: it runs on a call's path, so it
// only starts a goroutine that takes the sample. A tick that comes while one
// is being taken is left to that goroutine, which takes it next.
func (t *traffic) tick(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.sampling {
		t.pending = now
		return
	}
	t.sampling = true
	go t.sample(now)
}

func (t *traffic) sample(at time.Time) {
	for {
		cur := t.gather()
		t.mu.Lock()
		if cur != nil {
			t.keepLocked(at, cur)
		}
		at, t.pending = t.pending, time.Time{}
		if at.IsZero() || t.closed {
			t.sampling = false
			t.done.Broadcast()
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
	}
}

// settle waits until no sample is being taken.
func (t *traffic) settle() {
	t.mu.Lock()
	for t.sampling {
		t.done.Wait()
	}
	t.mu.Unlock()
}

// close stops the samples and waits for the one in progress.
func (t *traffic) close() {
	t.mu.Lock()
	t.closed = true
	for t.sampling {
		t.done.Wait()
	}
	t.mu.Unlock()
}

// gather reads the traffic families of every source, or nil.
func (t *traffic) gather() map[trafficKey]counts {
	if t == nil || t.g == nil {
		return nil
	}
	fams, err := t.g.Gather()
	if err != nil && len(fams) == 0 {
		return nil
	}
	return gatherCounts(fams)
}

// keepLocked adds a reading to the ring: one per sampleEvery at most. The
// ring's size bounds it (see dropLocked for the readings that go by age);
// the readings a full ring drops are contiguous ones, never a quiet spell's
// base.
func (t *traffic) keepLocked(now time.Time, cur map[trafficKey]counts) {
	if n := len(t.samples); n > 0 && now.Sub(t.samples[n-1].at) < sampleEvery {
		return
	}
	t.samples = append(t.samples, sample{at: now, deps: cur})
	if len(t.samples) > maxSamples {
		t.samples = t.samples[len(t.samples)-maxSamples:]
	}
}

// dropLocked drops the readings no window needs at now: the oldest goes once
// it is more than keepFor old and the next is the better base, that is
// also more than keepFor old or taken within a quietSpell of it. The one
// before a quiet spell stays: the reading after the spell counts the call
// that ended it.
func (t *traffic) dropLocked(now time.Time) {
	for len(t.samples) > 1 && now.Sub(t.samples[0].at) > keepFor {
		next := t.samples[1].at
		if now.Sub(next) <= keepFor && next.Sub(t.samples[0].at) > quietSpell {
			return
		}
		t.samples = t.samples[1:]
	}
}

// read returns each dependency's calls, attempts and latency over the last
// minutes: the metrics now, less the oldest reading kept (see dropLocked).
func (t *traffic) read(now time.Time) map[trafficKey]trafficView {
	cur := t.gather()
	if cur == nil {
		return nil
	}
	t.mu.Lock()
	for t.sampling {
		t.done.Wait() // a sample in progress: a moment
	}
	t.dropLocked(now)
	var base *sample
	if len(t.samples) > 0 && t.samples[0].at.Before(now) {
		b := t.samples[0]
		base = &b
	}
	t.keepLocked(now, cur)
	t.mu.Unlock()

	out := make(map[trafficKey]trafficView, len(cur))
	for k, c := range cur {
		src := sourceOf(k.owner)
		span := "since start"
		if base != nil {
			// A series the base does not hold had counted nothing then.
			c = c.minus(base.deps[k])
			if !base.start {
				span = "last " + durationText(now.Sub(base.at))
			}
		}
		v := trafficView{Calls: "—", Attempts: "—", P50: "—", P99: "—", Span: span, NotMeasured: src.notMeasured}
		if src.calls != nil {
			v.Calls = count(c.calls)
		}
		if src.attempts != nil {
			v.Attempts = count(c.attempts)
		}
		if src.duration != "" {
			v.P50, v.P99 = c.quantile(0.5), c.quantile(0.99)
		}
		out[k] = v
	}
	return out
}

// noTraffic is the traffic view of a dependency the metrics hold nothing
// for: zero calls since start when its plugin counts them (no call made
// yet), else why not; nil when the owner is not a known source.
func noTraffic(owner string) *trafficView {
	src := sourceOf(owner)
	if src == nil {
		return nil
	}
	v := &trafficView{Calls: "—", Attempts: "—", P50: "—", P99: "—", NotMeasured: src.notMeasured}
	if src.calls == nil && src.attempts == nil && src.duration == "" {
		return v
	}
	v.Span = "since start"
	if src.calls != nil {
		v.Calls = "0"
	}
	if src.attempts != nil {
		v.Attempts = "0"
	}
	return v
}

func gatherCounts(fams []*dto.MetricFamily) map[trafficKey]counts {
	out := map[trafficKey]counts{}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for _, src := range sources {
		keyOf := func(m *dto.Metric, label string) trafficKey {
			name := labelOf(m, label)
			if src.dep != nil {
				name = src.dep(name)
			}
			return trafficKey{src.owner, name}
		}
		add := func(ts []term, into func(*counts, float64)) {
			for _, tm := range ts {
				f := byName[tm.family]
				if f == nil {
					continue
				}
				for _, m := range f.GetMetric() {
					if tm.only != "" && labelOf(m, tm.only) != tm.is {
						continue
					}
					k := keyOf(m, cmp.Or(tm.label, src.label))
					c := out[k]
					into(&c, tm.sign*m.GetCounter().GetValue())
					out[k] = c
				}
			}
		}
		add(src.calls, func(c *counts, v float64) { c.calls += v })
		add(src.attempts, func(c *counts, v float64) { c.attempts += v })
		if f := byName[src.duration]; src.duration != "" && f != nil {
			for _, m := range f.GetMetric() {
				k := keyOf(m, src.label)
				c := out[k]
				c.addHistogram(m.GetHistogram())
				out[k] = c
			}
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	if name == "" {
		return ""
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// addHistogram adds h's buckets (one series per method or model) to c.
func (c *counts) addHistogram(h *dto.Histogram) {
	if h == nil {
		return
	}
	bs := h.GetBucket()
	if c.bounds == nil {
		for _, b := range bs {
			if !math.IsInf(b.GetUpperBound(), 1) {
				c.bounds = append(c.bounds, b.GetUpperBound())
			}
		}
		c.buckets = make([]float64, len(c.bounds))
	}
	for i, b := range bs {
		if i < len(c.buckets) && b.GetUpperBound() == c.bounds[i] {
			c.buckets[i] += float64(b.GetCumulativeCount())
		}
	}
	c.total += float64(h.GetSampleCount())
}

// minus returns c less an earlier reading.
func (c counts) minus(e counts) counts {
	d := counts{calls: c.calls - e.calls, attempts: c.attempts - e.attempts, bounds: c.bounds, total: c.total - e.total}
	d.buckets = make([]float64, len(c.buckets))
	for i := range c.buckets {
		d.buckets[i] = c.buckets[i]
		if i < len(e.buckets) {
			d.buckets[i] -= e.buckets[i]
		}
	}
	return d
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linearly within the bucket that holds it. Above the last bound it says
// "> bound"; with no observation, "—".
func (c counts) quantile(q float64) string {
	if c.total <= 0 {
		return "—"
	}
	rank := q * c.total
	lower, below := 0.0, 0.0
	for i, upper := range c.bounds {
		if c.buckets[i] >= rank {
			in := c.buckets[i] - below
			v := upper
			if in > 0 {
				v = lower + (upper-lower)*(rank-below)/in
			}
			return seconds(v)
		}
		lower, below = upper, c.buckets[i]
	}
	if len(c.bounds) == 0 {
		return "—"
	}
	return "> " + seconds(c.bounds[len(c.bounds)-1])
}

func seconds(s float64) string {
	if s < 1 {
		return strconv.FormatFloat(math.Round(s*10000)/10, 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(math.Round(s*100)/100, 'f', -1, 64) + " s"
}

func count(f float64) string { return strconv.FormatFloat(math.Round(f), 'f', 0, 64) }
