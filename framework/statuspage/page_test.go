package statuspage

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/jfastframework/jfast/framework/resilience"
)

func TestQueueOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		meta map[string]any
		want *queueView
	}{
		{map[string]any{"breaker": "x"}, nil},
		{map[string]any{"depth": map[string]int64{"mail": 0, "default": 3}, "dead": 2}, &queueView{Depth: "default: 3, mail: 0", Dead: "2"}},
		{map[string]any{"dead": float64(1)}, &queueView{Dead: "1"}},
		{map[string]any{"depth": nil}, &queueView{Depth: "—"}},
	} {
		got := queueOf(c.meta)
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("queueOf(%v) = %+v, want %+v", c.meta, got, c.want)
		}
	}
}

func histogram(bounds []float64, cumulative []uint64, total uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: &total}
	for i := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &bounds[i], CumulativeCount: &cumulative[i]})
	}
	return h
}

// The quantiles are histogram_quantile's: linear within the bucket.
func TestQuantile(t *testing.T) {
	t.Parallel()
	var c counts
	c.addHistogram(histogram([]float64{.01, .1, 1}, []uint64{50, 90, 100}, 100))
	if got := c.quantile(0.5); got != "10 ms" {
		t.Errorf("p50 = %s, want 10 ms (the 50th of 100 is the top of the first bucket)", got)
	}
	if got := c.quantile(0.99); got != "910 ms" {
		t.Errorf("p99 = %s, want 910 ms (0.1 + 0.9 × 9/10)", got)
	}
	var over counts
	over.addHistogram(histogram([]float64{.01}, []uint64{0}, 4))
	if got := over.quantile(0.5); got != "> 10 ms" {
		t.Errorf("all above the last bound: p50 = %s", got)
	}
	if got := (counts{}).quantile(0.5); got != "—" {
		t.Errorf("no observation: %s", got)
	}
	// Later minus earlier: only what happened between the two readings.
	var later counts
	later.addHistogram(histogram([]float64{.01, .1, 1}, []uint64{50, 90, 200}, 200))
	if got := later.minus(c).quantile(0.5); got != "550 ms" {
		t.Errorf("p50 of the 100 calls between the readings = %s, want 550 ms", got)
	}
}

func TestSplitRow(t *testing.T) {
	t.Parallel()
	got := splitRow(`| billing | FAIL: a \| b | ok |`)
	if strings.Join(got, "/") != "billing/FAIL: a | b/ok" {
		t.Errorf("splitRow = %q", got)
	}
}

func TestTimelineSegments(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	created := now.Add(-10 * time.Minute)
	ts := []resilience.Transition{{At: now.Add(-5 * time.Minute), From: resilience.StateClosed, To: resilience.StateOpen}}
	svg := string(timeline(created, resilience.StateClosed, resilience.StateOpen, ts, now))
	for _, want := range []string{
		`<rect x="0" y="0" width="300.0" height="18" fill="#eaeef2">`,     // 5 min before the breaker
		`<rect x="300.0" y="0" width="300.0" height="18" fill="#1a7f37">`, // closed for 5 min
		`<rect x="600.0" y="0" width="300.0" height="18" fill="#cf222e">`, // open since
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("timeline lacks %s:\n%s", want, svg)
		}
	}
}

// The timeline's tooltips name the states in the page's words: "half-open",
// never the raw half_open the rest of the page never shows.
func TestTimelineSaysHalfOpen(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ts := []resilience.Transition{
		{At: now.Add(-3 * time.Minute), From: resilience.StateClosed, To: resilience.StateOpen},
		{At: now.Add(-2 * time.Minute), From: resilience.StateOpen, To: resilience.StateHalfOpen},
		{At: now.Add(-time.Minute), From: resilience.StateHalfOpen, To: resilience.StateClosed},
	}
	svg := string(timeline(now.Add(-10*time.Minute), resilience.StateClosed, resilience.StateClosed, ts, now))
	for _, want := range []string{`<title>closed</title>`, `<title>open</title>`, `fill="#bf8700"><title>half-open</title>`} {
		if !strings.Contains(svg, want) {
			t.Errorf("timeline lacks %s:\n%s", want, svg)
		}
	}
	if strings.Contains(svg, "half_open") {
		t.Errorf("timeline shows the raw half_open:\n%s", svg)
	}
}

// An open breaker's card says what opened it: its own counts restarted at
// the opening.
func TestTrippedBy(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 12, 0, 3, 0, time.UTC)
	rules := resilience.BreakerView{Failures: 5, FailureRate: 0.5, Window: 30 * time.Second, MinimumCalls: 20}
	for _, c := range []struct {
		name         string
		state        resilience.State
		since        time.Time
		tripped      resilience.StateChange
		last         []resilience.Transition
		label, wants string
	}{
		{"consecutive", resilience.StateOpen, at, resilience.StateChange{To: resilience.StateOpen, At: at, Consecutive: 5, WindowCalls: 7, WindowFailures: 5}, nil,
			"opened at 12:00:03 by", "5 consecutive failures (opens at 5)"},
		{"rate", resilience.StateOpen, at, resilience.StateChange{To: resilience.StateOpen, At: at, Consecutive: 2, WindowCalls: 24, WindowFailures: 13}, nil,
			"opened at 12:00:03 by", "13 failures in 24 calls within 30s, 54.2 % (opens at 50 % of ≥ 20)"},
		{"consecutive, the last a hang", resilience.StateHalfOpen, at.Add(15 * time.Second), resilience.StateChange{To: resilience.StateOpen, At: at, Consecutive: 5, Hang: true}, nil,
			"opened at 12:00:03 by", "5 consecutive failures (opens at 5), the last with no answer within its deadline"},
		{"reopened by a probe that hung", resilience.StateOpen, at.Add(15 * time.Second), resilience.StateChange{To: resilience.StateOpen, At: at, Consecutive: 5},
			[]resilience.Transition{{At: at.Add(15 * time.Second), From: resilience.StateHalfOpen, To: resilience.StateOpen, Hang: true}},
			"reopened at 12:00:18:", "the probe call got no answer within its deadline; first opened at 12:00:03 by 5 consecutive failures (opens at 5)"},
		{"half-open by the silence rule", resilience.StateHalfOpen, at, resilience.StateChange{To: resilience.StateHalfOpen, At: at, Consecutive: 1, Hang: true}, nil,
			"half-open since 12:00:03 by", "a call that got no answer within its deadline while nothing else answered"},
	} {
		v := rules
		v.State, v.Since, v.Tripped, v.Transitions = c.state, c.since, &c.tripped, c.last
		if label, text := trippedBy(&v); label != c.label || text != c.wants {
			t.Errorf("%s: %q %q, want %q %q", c.name, label, text, c.label, c.wants)
		}
	}
}

// A time at or after the page's reading of the clock is "0s ago", never
// "-0s ago": reading a breaker can move it at a later reading.
func TestAgo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 2, 15, 45, 0, time.UTC)
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{now.Add(-90 * time.Second), "02:14:15 (1m30s ago)"},
		{now.Add(-1500 * time.Millisecond), "02:15:43 (1.5s ago)"},
		{now.Add(-20 * time.Millisecond), "02:15:44 (0s ago)"},
		{now, "02:15:45 (0s ago)"},
		{now.Add(40 * time.Millisecond), "02:15:45 (0s ago)"},
		{now.Add(3 * time.Second), "02:15:48 (0s ago)"},
	} {
		if got := ago(now, c.t); got != c.want {
			t.Errorf("ago(%v) = %q, want %q", c.t.Sub(now), got, c.want)
		}
	}
}
