package llm_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/problem"
)

// A 3xx from the provider is an answer this client cannot use: it never
// follows it (the key would go with it), and it is no empty success either.
// Chat and ChatStream fail at once with a KindStatus error carrying the
// status, never retried, a 502 naming the provider, and the breaker counts
// no failure (the provider answered).
func TestRedirectIsAnError(t *testing.T) {
	t.Parallel()
	for _, code := range []int{302, 307} {
		for _, stream := range []bool{false, true} {
			p := newProvider(t, status(code, "Location", "https://elsewhere.example/v1/chat/completions"), complete("hello"))
			c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, autoClock())
			var err error
			if stream {
				var s *llm.Stream
				s, err = c.ChatStream(context.Background(), params("hi"))
				if err == nil {
					t.Fatalf("%d stream: a stream of %q, want an error", code, readAll(s))
				}
			} else {
				var r *llm.Response
				r, err = c.Chat(context.Background(), params("hi"))
				if err == nil {
					t.Fatalf("%d: an answer %q, want an error", code, r.Text())
				}
			}
			e := llmError(t, err)
			if e.Kind != llm.KindStatus || e.StatusCode != code || e.Attempts != 1 || p.Requests() != 1 {
				t.Fatalf("%d stream=%v: error %+v after %d requests, want status %d after 1", code, stream, e, p.Requests(), code)
			}
			if pr, _ := problem.As(err); pr.Status != http.StatusBadGateway || pr.Extensions["upstream"] != "primary" || !strings.Contains(pr.Detail, "redirect") {
				t.Fatalf("%d stream=%v: problem %+v, want a 502 naming primary and the redirect", code, stream, pr)
			}
			if s := c.Breaker().Snapshot(); s.State != resilience.StateClosed || s.Consecutive != 0 {
				t.Fatalf("%d stream=%v: breaker %+v, want closed, no failure", code, stream, s)
			}
		}
	}
}

// Through a service: the plain route and the relayed one answer 502 (not
// 200 with an empty answer or an empty stream), and the metrics label the
// attempt with the status the provider sent.
func TestServiceRedirectIsA502(t *testing.T) {
	t.Parallel()
	p := newProvider(t, status(http.StatusTemporaryRedirect, "Location", "https://elsewhere.example/v1/chat/completions"))
	svc := startService(t, p, nil, "")
	for _, path := range []string{"/ask", "/stream"} {
		r := svc.Do(t, http.MethodPost, path, "")
		if r.Status != http.StatusBadGateway || strings.Contains(r.String(), "[DONE]") {
			t.Fatalf("%s: %d %s, want a 502", path, r.Status, r)
		}
	}
	metrics := svc.Get(t, "/metrics").String()
	for _, want := range []string{
		`jfast_llm_attempts_total{provider="primary",result="307"} 2`,
		`jfast_llm_calls_total{model="test-model",outcome="status",provider="primary"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, `result="200"`) {
		t.Errorf("/metrics counts a 200 the provider never sent")
	}
}
