package framework_test

import (
	"strings"
	"testing"

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
