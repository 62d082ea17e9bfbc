package statuspage

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Calls, attempts and latency come from the metrics the http and grpc
// plugins keep for /metrics (counters and a latency histogram per
// upstream), read when the page is rendered: nothing is measured twice and
// nothing is read while nobody looks. "Over the last minutes" is the
// difference with an earlier reading the page kept: up to trafficSpan old,
// one kept every sampleEvery. A page opened on a service nobody watched
// shows the totals since start until it has one.

const (
	trafficSpan = 5 * time.Minute
	sampleEvery = 10 * time.Second
)

// trafficFamilies maps each owner to its metric names: calls, attempts,
// call duration (a histogram). Every one has an "upstream" label.
var trafficFamilies = map[string][3]string{
	"http": {"jfast_http_client_calls_total", "jfast_http_client_attempts_total", "jfast_http_client_call_duration_seconds"},
	"grpc": {"jfast_grpc_client_calls_total", "jfast_grpc_client_attempts_total", "jfast_grpc_client_call_duration_seconds"},
}

type trafficKey struct{ owner, name string }

type trafficView struct {
	Calls, Attempts string
	P50, P99        string
	Span            string
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
}

// traffic keeps the earlier readings.
type traffic struct {
	mu      sync.Mutex
	samples []sample // oldest first
}

// read returns each dependency's calls, attempts and latency over the last
// minutes, from g.
func (t *traffic) read(g prometheus.Gatherer, now time.Time) map[trafficKey]trafficView {
	if g == nil {
		return nil
	}
	fams, err := g.Gather()
	if err != nil && len(fams) == 0 {
		return nil
	}
	cur := gatherCounts(fams)
	if len(cur) == 0 {
		return nil
	}
	t.mu.Lock()
	for len(t.samples) > 0 && now.Sub(t.samples[0].at) > trafficSpan {
		t.samples = t.samples[1:]
	}
	var base *sample
	if len(t.samples) > 0 && t.samples[0].at.Before(now) {
		base = &t.samples[0]
	}
	if n := len(t.samples); n == 0 || now.Sub(t.samples[n-1].at) >= sampleEvery {
		t.samples = append(t.samples, sample{at: now, deps: cur})
	}
	t.mu.Unlock()

	out := make(map[trafficKey]trafficView, len(cur))
	for k, c := range cur {
		span := "since start"
		if base != nil {
			c = c.minus(base.deps[k])
			span = "last " + durationText(now.Sub(base.at))
		}
		out[k] = trafficView{
			Calls: count(c.calls), Attempts: count(c.attempts),
			P50: c.quantile(0.5), P99: c.quantile(0.99), Span: span,
		}
	}
	return out
}

func gatherCounts(fams []*dto.MetricFamily) map[trafficKey]counts {
	out := map[trafficKey]counts{}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	for owner, names := range trafficFamilies {
		for i, name := range names {
			f := byName[name]
			if f == nil {
				continue
			}
			for _, m := range f.GetMetric() {
				k := trafficKey{owner, upstreamOf(m)}
				c := out[k]
				switch i {
				case 0:
					c.calls += m.GetCounter().GetValue()
				case 1:
					c.attempts += m.GetCounter().GetValue()
				case 2:
					c.addHistogram(m.GetHistogram())
				}
				out[k] = c
			}
		}
	}
	return out
}

func upstreamOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "upstream" {
			return l.GetValue()
		}
	}
	return ""
}

// addHistogram adds h's buckets (one series per method, for grpc) to c.
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
