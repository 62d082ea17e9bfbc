package llm_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/llm"
)

// answer is what the test provider does with one request.
type answer func(w http.ResponseWriter, r *http.Request)

// provider is a local OpenAI-compatible server: it answers POST
// /v1/chat/completions with the chat-completions JSON, or the SSE stream
// when the request asks for one, as its script says — one answer per
// request, the last repeated.
type provider struct {
	srv      *httptest.Server
	script   []answer
	requests atomic.Int32
	release  chan struct{} // closed at cleanup: every stalled answer returns

	mu       sync.Mutex
	bodies   []string // request bodies, in order
	auths    []string // Authorization headers, in order
	canceled chan struct{}
}

func newProvider(t *testing.T, script ...answer) *provider {
	t.Helper()
	p := &provider{script: script, release: make(chan struct{}), canceled: make(chan struct{}, 16)}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	t.Cleanup(func() { close(p.release) })
	return p
}

// URL is the base_url of the provider ("http://127.0.0.1:PORT/v1").
func (p *provider) URL() string { return p.srv.URL + "/v1" }

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	n := int(p.requests.Add(1)) - 1
	p.mu.Lock()
	p.bodies = append(p.bodies, string(body))
	p.auths = append(p.auths, r.Header.Get("Authorization"))
	p.mu.Unlock()
	a := p.script[min(n, len(p.script)-1)]
	a(w, r)
}

func (p *provider) Requests() int { return int(p.requests.Load()) }

func (p *provider) Bodies() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bodies...)
}

// complete answers a chat completion whose content is text.
func complete(text string) answer {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"test-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`, text)
	}
}

// status answers code with an OpenAI-style error body and the headers given
// as name, value pairs.
func status(code int, headers ...string) answer {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"test","code":null,"param":null}}`, code)
	}
}

// chunk is one chat.completion.chunk event carrying text.
func chunk(text string) string {
	return fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", text)
}

const usageChunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"test-model","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}` + "\n\n"

// streamAnswer streams texts as chunks, then the usage chunk and [DONE];
// with stall set, it stops after the texts and says nothing more until the
// client goes away.
func (p *provider) streamAnswer(stall bool, texts ...string) answer {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		for _, t := range texts {
			_, _ = io.WriteString(w, chunk(t))
			_ = rc.Flush()
		}
		if stall {
			p.stallUntilGone(r)
			return
		}
		_, _ = io.WriteString(w, usageChunk+"data: [DONE]\n\n")
	}
}

// stallUntilGone waits until the client goes away (or the test ends) and
// records the client's going.
func (p *provider) stallUntilGone(r *http.Request) {
	select {
	case <-r.Context().Done():
		p.canceled <- struct{}{}
	case <-p.release:
	}
}

// stall answers nothing at all until the client goes away.
func (p *provider) stall() answer {
	return func(w http.ResponseWriter, r *http.Request) { p.stallUntilGone(r) }
}

// params is a one-message request; the model is the provider's.
func params(prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
}

// client makes a client of p with cfg's non-zero fields over the defaults,
// on clk.
func client(t *testing.T, p *provider, cfg llm.ProviderConfig, clk resilience.Clock, opts ...llm.ClientOption) *llm.Client {
	t.Helper()
	if cfg.BaseURL == "" && p != nil {
		cfg.BaseURL = p.URL()
	}
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.Name == "" {
		cfg.Name = "primary"
	}
	// The breaker's state changes are logged; the tests read its state.
	c, err := llm.NewClient(cfg, append([]llm.ClientOption{llm.WithClock(clk), llm.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// autoClock is a test clock whose sleeps pass at once (and are recorded).
func autoClock() *resilience.TestClock {
	clk := jfasttest.NewClock()
	clk.SetAutoAdvance(true)
	return clk
}

// readAll reads s to its end and returns the texts of its chunks.
func readAll(s *llm.Stream) string {
	var b strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

// within fails the test unless fn returns within d of real time (a bound
// for calls that must not hang, generous for a loaded machine).
func within(t *testing.T, d time.Duration, fn func()) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %s", d)
	}
	return time.Since(start)
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
