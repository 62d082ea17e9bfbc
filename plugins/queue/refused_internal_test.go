package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestEnqueueRefusedAtTheCallIsCounted: an enqueue refused before anything is
// sent (a bad or undeclared kind, a payload that does not encode, a bad
// option, EnqueueTx on a backend without transactions) is a "not enqueued"
// failure, counted with outcome "invalid"; it was not counted
// at all. A kind not declared here is counted under "(undeclared)", never
// under the caller's string.
func TestEnqueueRefusedAtTheCallIsCounted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		enqueue func(p *Plugin) error
		label   string
	}{
		{"undeclared kind", func(p *Plugin) error {
			_, err := p.Enqueue(context.Background(), "jbo", struct{}{})
			return err
		}, undeclaredKindLabel},
		{"kind against the rule", func(p *Plugin) error {
			_, err := p.Enqueue(context.Background(), "j", struct{}{})
			return err
		}, undeclaredKindLabel},
		{"payload that does not encode", func(p *Plugin) error {
			_, err := p.Enqueue(context.Background(), "job", func() {})
			return err
		}, "job"},
		{"timeout above job_timeout", func(p *Plugin) error {
			_, err := p.Enqueue(context.Background(), "job", struct{}{}, Timeout(time.Hour))
			return err
		}, "job"},
		{"negative max attempts", func(p *Plugin) error {
			_, err := p.Enqueue(context.Background(), "job", struct{}{}, MaxAttempts(-1))
			return err
		}, "job"},
		{"EnqueueTx without transactions", func(p *Plugin) error {
			_, err := p.EnqueueTx(context.Background(), nil, "job", struct{}{})
			return err
		}, "job"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &scriptedBackend{}
			p := guardPlugin(t, b)
			err := tc.enqueue(p)
			if !errors.Is(err, ErrNotEnqueued) || b.calls != 0 {
				t.Fatalf("err = %v after %d backend calls, want ErrNotEnqueued before any", err, b.calls)
			}
			var m dto.Metric
			if err := p.metrics.enq.WithLabelValues(tc.label, "invalid").Write(&m); err != nil {
				t.Fatal(err)
			}
			if got := m.GetCounter().GetValue(); got != 1 {
				t.Fatalf(`jfast_queue_enqueued_total{kind=%q,outcome="invalid"} = %v, want 1`, tc.label, got)
			}
		})
	}
}
