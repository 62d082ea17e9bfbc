package framework_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/jfastframework/jfast/framework"
)

func newCalls() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_test_calls_total", Help: "Calls."}, []string{"upstream"})
}

func TestRegisterOrReuseSharesTheRegisteredCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, second := newCalls(), newCalls()
	if err := framework.RegisterOrReuse(reg, &first); err != nil {
		t.Fatalf("first registration: %v", err)
	}
	kept := second
	if err := framework.RegisterOrReuse(reg, &second); err != nil {
		t.Fatalf("second registration of an equal collector: %v, want nil (reused)", err)
	}
	if second != first {
		t.Fatal("the second collector was not replaced by the one already registered")
	}
	if kept == second {
		t.Fatal("the second collector is still the unregistered one")
	}
	first.WithLabelValues("a").Inc()
	second.WithLabelValues("a").Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() == "jfast_test_calls_total" {
			series = append(series, mf.GetMetric()...)
		}
	}
	if len(series) != 1 || series[0].GetCounter().GetValue() != 2 {
		t.Fatalf("series = %v, want one series counting 2: both clients count into it", series)
	}
}

func TestRegisterOrReuseReturnsOtherRefusals(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := newCalls()
	if err := framework.RegisterOrReuse(reg, &calls); err != nil {
		t.Fatal(err)
	}
	// Same name, other labels: not equal, so not reusable.
	clash := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jfast_test_calls_total", Help: "Calls."}, []string{"route"})
	kept := clash
	err := framework.RegisterOrReuse(reg, &clash)
	if err == nil || !strings.Contains(err.Error(), "jfast_test_calls_total") {
		t.Fatalf("err = %v, want the registry's refusal naming jfast_test_calls_total", err)
	}
	if clash != kept {
		t.Fatal("the collector was replaced after a refusal")
	}
}

func TestRegisterOrReuseKeepsACollectorOfAnotherType(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jfast_test_calls_total", Help: "Calls."}, []string{"upstream"})
	if err := reg.Register(g); err != nil {
		t.Fatal(err)
	}
	calls := newCalls()
	kept := calls
	// The registry calls it already registered (the descriptions are equal);
	// the gauge cannot serve as a counter, so the counter stays its own.
	if err := framework.RegisterOrReuse(reg, &calls); err != nil {
		t.Fatalf("err = %v, want nil (already registered)", err)
	}
	if calls != kept {
		t.Fatal("a counter vec was replaced by a collector of another type")
	}
}

func TestRegisterAllStopsAtTheFirstRefusal(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := framework.NewCounterVec("jfast_test_calls_total", "Calls.", "upstream")
	if err := framework.RegisterAll(reg, calls); err != nil {
		t.Fatal(err)
	}
	// A second registration of the same collector is refused, and what
	// follows it is not registered.
	after := framework.NewCounter("jfast_test_after_total", "After.")
	err := framework.RegisterAll(reg, calls, after)
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("err = %v, want prometheus.AlreadyRegisteredError", err)
	}
	if reg.Unregister(after) {
		t.Fatal("the collector after the refusal was registered")
	}
}
