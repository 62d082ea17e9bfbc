package framework_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Two plugins' sets in one registry count in the same families, told apart
// by the plugin label; an attempt record counts the attempt and what
// followed it (not an attempt that sent nothing), a refused hedge counts
// as the refused retry it is.
func TestClientMetricsOneSetForEveryPlugin(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	httpSet, grpcSet := framework.NewClientMetrics(), framework.NewClientMetrics()
	for _, m := range []*framework.ClientMetrics{httpSet, grpcSet} {
		if err := m.Register(reg); err != nil {
			t.Fatal(err)
		}
	}
	billing, inventory := httpSet.For("http", "billing"), grpcSet.For("grpc", "inventory")
	billing.Attempt(resilience.AttemptRecord{N: 1, Stop: resilience.StopNone})
	billing.Attempt(resilience.AttemptRecord{N: 2, Stop: resilience.StopBudget})
	billing.Attempt(resilience.AttemptRecord{N: 1, Stop: resilience.StopFinal, Verdict: resilience.Verdict{Unsent: true}}) // no instance took it: not sent
	billing.HedgeRefused(resilience.StopBudget)
	billing.HedgeRefused(resilience.StopThrottled)
	billing.Calls("response").Inc()
	billing.Rejected()
	inventory.Sent()
	inventory.Transition(resilience.StateChange{From: resilience.StateClosed, To: resilience.StateOpen})
	got := map[string]float64{}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for series, want := range map[string]float64{
		"jfast_client_attempts_total{dependency=billing,plugin=http}":                                  2,
		"jfast_client_attempts_total{dependency=inventory,plugin=grpc}":                                1,
		"jfast_client_retries_total{dependency=billing,plugin=http}":                                   1,
		"jfast_client_retry_budget_refusals_total{dependency=billing,plugin=http}":                     2,
		"jfast_client_throttled_retries_total{dependency=billing,plugin=http}":                         1,
		"jfast_client_bulkhead_rejections_total{dependency=billing,plugin=http}":                       1,
		"jfast_client_calls_total{dependency=billing,outcome=response,plugin=http}":                    1,
		"jfast_client_breaker_state{dependency=inventory,plugin=grpc}":                                 1,
		"jfast_client_breaker_transitions_total{dependency=inventory,from=closed,plugin=grpc,to=open}": 1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}

// The state gauge reads the breaker it follows before each scrape: an open
// breaker whose cool-down has ended reads half-open (2), as its snapshot
// and /ready say, with no call to make it so.
func TestBreakerStateGaugeFollowsTheCoolDown(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := framework.NewClientMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	dep := m.For("http", "billing")
	clock := resilience.NewTestClock(time.Unix(1_700_000_000, 0))
	cfg := resilience.DefaultBreakerConfig()
	cfg.BreakerFailures = 1
	br := resilience.NewBreaker(cfg.Opts("billing", clock, dep.Transition))
	dep.Follow(br)
	ticket, err := br.Allow()
	if err != nil {
		t.Fatal(err)
	}
	ticket.Done(resilience.Failure)
	state := func() float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "jfast_client_breaker_state" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no jfast_client_breaker_state")
		return 0
	}
	if s := state(); s != 1 {
		t.Fatalf("state %v after the failure, want 1 (open)", s)
	}
	clock.Advance(br.Snapshot().RetryAfter)
	if s := state(); s != 2 {
		t.Fatalf("state %v once the cool-down ended, want 2 (half-open)", s)
	}
}
