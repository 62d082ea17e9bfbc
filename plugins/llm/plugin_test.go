package llm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/openai/openai-go/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// The prompt and the answer of the service tests: neither may appear in a
// log line, an error or a span.
const (
	secretPrompt = "PROMPT-4f2a-never-logged"
	secretAnswer = "ANSWER-9c1e-never-logged"
)

// routes mounts POST /ask (a plain call) and POST /stream (relayed as SSE)
// on provider "primary".
func routes(app *framework.App, r chi.Router) error {
	gpt, err := llm.Provider(app, "primary")
	if err != nil {
		return err
	}
	ask := func(r *http.Request) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(secretPrompt)}}
	}
	r.Method(http.MethodPost, "/ask", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		resp, err := gpt.Chat(r.Context(), ask(r))
		if err != nil {
			return err
		}
		w.Header().Set(llm.ProviderHeader, resp.Provider)
		return framework.JSON(w, http.StatusOK, map[string]string{"answer": resp.Text()})
	}))
	r.Method(http.MethodPost, "/stream", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		s, err := gpt.ChatStream(framework.StreamContext(r), ask(r))
		if err != nil {
			return err
		}
		return llm.Relay(w, r, s)
	}))
	return nil
}

type service struct {
	*jfasttest.Service
	exp *tracetest.InMemoryExporter
	tel *telemetry.Plugin
}

// startService boots an App with the llm and telemetry plugins, provider
// "primary" at p (its extra keys in table) and "backup" at b when not nil.
func startService(t *testing.T, p, b *provider, table string) *service {
	t.Helper()
	toml := "[app]\nname = \"ask\"\n[plugins]\nenabled = [\"observability\", \"llm\", \"telemetry\"]\n[plugin.llm]\ncritical = true\n" +
		"[plugin.llm.providers.primary]\nbase_url = \"" + p.URL() + "\"\nmodel = \"test-model\"\napi_key = \"sk-never-printed\"\n" + table
	if b != nil {
		toml += "fallback = \"backup\"\n[plugin.llm.providers.backup]\nbase_url = \"" + b.URL() + "\"\nmodel = \"backup-model\"\n"
	}
	exp := tracetest.NewInMemoryExporter()
	tel := telemetry.New(telemetry.WithExporter(exp))
	svc := jfasttest.Start(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{llm.New(), tel}, Routes: routes, Clock: autoClock()})
	return &service{Service: svc, exp: exp, tel: tel}
}

func (s *service) spans(t *testing.T) tracetest.SpanStubs {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.tel.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	return s.exp.GetSpans()
}

// The plain and relayed routes answer; the metrics count calls, attempts
// and tokens by provider and model; the span has the model and the token
// counts; no log line or span holds the prompt or the answer.
func TestServiceCallsAndRelays(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{status(500), complete(secretAnswer), p.streamAnswer(false, secretAnswer, " two")}
	svc := startService(t, p, nil, "")

	r := svc.Do(t, http.MethodPost, "/ask", "")
	if r.Status != 200 || !strings.Contains(r.String(), secretAnswer) || r.Header.Get(llm.ProviderHeader) != "primary" {
		t.Fatalf("/ask: %d %s", r.Status, r)
	}
	r = svc.Do(t, http.MethodPost, "/stream", "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "text/event-stream" || r.Header.Get(llm.ProviderHeader) != "primary" {
		t.Fatalf("/stream: %d %v %s", r.Status, r.Header, r)
	}
	events := sseData(r.String())
	if len(events) != 4 || events[3] != "[DONE]" || !strings.Contains(events[0], secretAnswer) || !strings.Contains(events[2], `"prompt_tokens":7`) {
		t.Fatalf("/stream events %q, want two chunks, the usage chunk and [DONE]", events)
	}

	metrics := svc.Get(t, "/metrics").String()
	for _, want := range []string{
		`jfast_llm_calls_total{model="test-model",outcome="ok",provider="primary"} 2`,
		`jfast_llm_attempts_total{provider="primary",result="500"} 1`,
		`jfast_llm_attempts_total{provider="primary",result="200"} 2`,
		`jfast_llm_tokens_total{direction="in",model="test-model",provider="primary"} 14`,
		`jfast_llm_tokens_total{direction="out",model="test-model",provider="primary"} 6`,
		`jfast_llm_first_token_seconds_count{model="test-model",provider="primary"} 1`,
		`jfast_llm_call_duration_seconds_count{model="test-model",provider="primary"} 2`,
		`jfast_client_retries_total{dependency="primary",plugin="llm"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	var chats int
	for _, s := range svc.spans(t) {
		for _, a := range s.Attributes {
			if v := a.Value.String(); strings.Contains(v, secretPrompt) || strings.Contains(v, secretAnswer) {
				t.Errorf("span %s holds the prompt or the answer in %s", s.Name, a.Key)
			}
		}
		if s.Name != "chat test-model" {
			continue
		}
		chats++
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		if attrs["gen_ai.request.model"] != "test-model" || attrs["gen_ai.usage.input_tokens"] != "7" || attrs["gen_ai.usage.output_tokens"] != "3" || attrs["llm.provider"] != "primary" {
			t.Errorf("span attributes %v, want the model and the token counts", attrs)
		}
	}
	if chats != 2 {
		t.Errorf("%d chat spans, want 2", chats)
	}
	if l := svc.Logs(); strings.Contains(l, secretPrompt) || strings.Contains(l, secretAnswer) || strings.Contains(l, "sk-never-printed") {
		t.Errorf("the logs hold the prompt, the answer or the key:\n%s", l)
	}
}

// A stream cut after it started ends with an error event carrying the
// problem, and nothing is logged but the error's own text.
func TestRelayCutStreamEndsWithErrorEvent(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(chunk(secretAnswer)))
		w.(http.Flusher).Flush()
		hj, _ := w.(http.Hijacker)
		conn, _, err := hj.Hijack()
		if err == nil {
			_ = conn.Close() // reset mid-stream
		}
	}}
	svc := startService(t, p, nil, "attempts = 1\n")
	r := svc.Do(t, http.MethodPost, "/stream", "")
	events := sseData(r.String())
	if r.Status != 200 || len(events) != 2 || !strings.Contains(events[0], secretAnswer) || !strings.Contains(r.String(), "event: error") {
		t.Fatalf("/stream: %d %q", r.Status, r)
	}
	var pr map[string]any
	if err := json.Unmarshal([]byte(events[1]), &pr); err != nil || pr["status"] != float64(503) || pr["dependency"] != "primary" {
		t.Fatalf("error event %q, want a 503 problem naming primary", events[1])
	}
	if l := svc.Logs(); strings.Contains(l, secretPrompt) || strings.Contains(l, secretAnswer) {
		t.Errorf("the logs hold the prompt or the answer:\n%s", l)
	}
}

// With its breaker open, the provider's calls go to its fallback, which the
// answer names; /ready shows the breaker open and the service degraded —
// never unavailable, though the plugin is critical.
func TestServiceFallsBackAndStaysReady(t *testing.T) {
	t.Parallel()
	down := newProvider(t, status(503))
	up := newProvider(t, complete("from backup"))
	svc := startService(t, down, up, "attempts = 1\nbreaker_failures = 1\n")
	if r := svc.Do(t, http.MethodPost, "/ask", ""); r.Status != 503 || !strings.Contains(r.String(), `"dependency":"primary"`) {
		t.Fatalf("first /ask: %d %s, want the 503 naming primary", r.Status, r)
	}
	r := svc.Do(t, http.MethodPost, "/ask", "")
	if r.Status != 200 || r.Header.Get(llm.ProviderHeader) != "backup" || !strings.Contains(r.String(), "from backup") {
		t.Fatalf("second /ask: %d %v %s, want backup's answer", r.Status, r.Header, r)
	}
	ready := svc.Get(t, "/ready")
	var body struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Healthy bool           `json:"healthy"`
			Detail  string         `json:"detail"`
			Meta    map[string]any `json:"meta"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(ready.Body, &body); err != nil {
		t.Fatalf("/ready: %v: %s", err, ready)
	}
	check := body.Checks["llm"]
	providers, _ := check.Meta["providers"].(map[string]any)
	primary, _ := providers["primary"].(map[string]any)
	breaker, _ := primary["breaker"].(map[string]any)
	if ready.Status != 200 || body.Status != "degraded" || check.Healthy || breaker["state"] != "open" || primary["fallback"] != "backup" {
		t.Fatalf("/ready: %d %s, want 200 degraded with primary's breaker open", ready.Status, ready)
	}
	if !strings.Contains(svc.Get(t, "/metrics").String(), `jfast_llm_fallbacks_total{fallback="backup",provider="primary"} 1`) {
		t.Error("/metrics does not count the fallback")
	}
}

// Asking for a provider that is not configured fails the boot, naming the
// configured ones.
func TestUnknownProviderFailsBoot(t *testing.T) {
	t.Parallel()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"llm\"]\n[plugin.llm.providers.primary]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\n",
		Plugins: []framework.Plugin{llm.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			_, err := llm.Provider(app, "openai")
			return err
		},
	})
	if err == nil {
		err = app.Start(context.Background())
		defer func() { _ = app.Stop(context.Background()) }()
	}
	if err == nil || !strings.Contains(err.Error(), "no provider 'openai'") || !strings.Contains(err.Error(), "configured providers: primary") {
		t.Fatalf("boot: %v, want the unknown provider named with the configured ones", err)
	}
}

// sseData returns the data of every event of an SSE body.
func sseData(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// A client of the relay that goes away cancels the provider's request.
func TestRelayClientGoneCancelsProvider(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{p.streamAnswer(true, "first")}
	svc := startService(t, p, nil, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.URL+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") || !strings.Contains(line, "first") {
		t.Fatalf("first line %q, %v; want the first chunk", line, err)
	}
	cancel() // the client goes away
	within(t, 10*time.Second, func() { <-p.canceled })
}
