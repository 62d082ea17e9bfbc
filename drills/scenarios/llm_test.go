package scenarios_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/openai/openai-go/v3"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/llm"
)

// --- a model provider --------------------------------------------------------

// modelProvider is a local OpenAI-compatible server: a chat completion for
// every request, or a 429 with Retry-After: 60 while storm is set.
type modelProvider struct {
	storm    atomic.Bool
	requests atomic.Int64
}

func (m *modelProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	m.requests.Add(1)
	w.Header().Set("Content-Type", "application/json")
	if m.storm.Load() {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"rate limited","type":"requests","code":"rate_limit_exceeded","param":null}}`)
		return
	}
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
}

// llmService starts an App whose GET /ask calls the provider "model" (a local
// OpenAI-compatible server behind a fault proxy) with a plain chat
// completion; /plain touches no provider.
func llmService(t *testing.T) (*jfasttest.Service, *modelProvider, *drills.Proxy) {
	t.Helper()
	m := &modelProvider{}
	svc, p := proxied{
		plugins: []framework.Plugin{llm.New()},
		toml: func(addr string) string {
			return `[plugin.llm.providers.model]
base_url = "http://` + addr + `/v1"
model = "m"
connect_timeout = "300ms"
read_gap = "500ms"
timeout = "1s"
attempts = 2
breaker_failures = 3
breaker_cool_down = "` + coolDown + `"
`
		},
		routes: func(app *framework.App, r chi.Router) error {
			model, err := llm.Provider(app, "model")
			if err != nil {
				return err
			}
			r.Method(http.MethodGet, "/ask", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
				resp, err := model.Chat(r.Context(), openai.ChatCompletionNewParams{
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
				})
				if err != nil {
					return err
				}
				return framework.JSON(w, http.StatusOK, map[string]string{"answer": resp.Text()})
			}))
			return nil
		},
	}.start(t, httpUpstream(t, m))
	return svc, m, p
}

var llmDrill = proxiedDrill{
	dependency: "llm", route: "/ask",
	nameKey: "dependency", nameValue: "model", check: "llm",
	deadline: time.Second + margin, // the provider's timeout
}.drill

// TestDrillLLMProviderBlackhole: the provider keeps its socket open and
// answers nothing; a plain call is cut at timeout with a 503 problem
// naming the provider, until the breaker opens and the route answers at
// once; /ready degraded (never unavailable); after the proxy passes again the
// same App answers again.
func TestDrillLLMProviderBlackhole(t *testing.T) {
	svc, _, p := llmService(t)
	run(t, llmDrill(svc, "provider blackhole (proxy)", p.Blackhole, p.Pass))
}

// TestDrillLLMProvider429Storm: the provider answers every request 429 with
// Retry-After: 60, more than max_retry_after (30 s): each call is answered
// at once, a 503 naming the provider with Retry-After: 60, after a single
// request (no retry multiplies the storm); the breaker stays closed (a 429
// is the provider asking for calm, not an outage), so /ready stays ok; when
// the storm ends the next call answers 200. The row is recorded by hand: the
// drill harness expects /ready to report the dependency, which a rate limit
// must not do.
func TestDrillLLMProvider429Storm(t *testing.T) {
	svc, m, _ := llmService(t)
	res := drills.Result{Dependency: "llm", Fault: "provider 429 storm (Retry-After: 60)"}
	defer func() { record(res) }()
	fail := func(err error) {
		res.Err = err
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (*http.Response, []byte, time.Duration) {
		start := time.Now()
		resp, err := client.Get(svc.URL + path)
		if err != nil {
			fail(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp, body, time.Since(start)
	}
	m.storm.Store(true)
	before := m.requests.Load()
	const n = 20
	var took []time.Duration
	for i := range n {
		resp, body, d := get("/ask")
		var pr map[string]any
		_ = json.Unmarshal(body, &pr)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "60" || pr["dependency"] != "model" {
			fail(fmt.Errorf("GET /ask during the storm: %d Retry-After %q %s, want 503 naming model with Retry-After 60", resp.StatusCode, resp.Header.Get("Retry-After"), body))
		}
		if d > margin {
			fail(fmt.Errorf("GET /ask during the storm took %s: it waited", d))
		}
		if i == 0 {
			res.Status, res.FirstAnswer = resp.StatusCode, d
		}
		took = append(took, d)
	}
	if sent := m.requests.Load() - before; sent != n {
		fail(fmt.Errorf("%d calls sent %d requests, want one each", n, sent))
	}
	slices.Sort(took)
	res.AnsweredP50, res.AnsweredMax = took[len(took)/2], took[len(took)-1]
	readyStart := time.Now()
	resp, body, _ := get("/ready")
	res.ReadyMax = time.Since(readyStart)
	var ready struct {
		Verdict string `json:"verdict"`
		Checks  map[string]struct {
			Healthy bool `json:"healthy"`
		} `json:"checks"`
	}
	_ = json.Unmarshal(body, &ready)
	if resp.StatusCode != http.StatusOK || ready.Verdict != "ok" || !ready.Checks["llm"].Healthy {
		fail(fmt.Errorf("/ready during the storm: %d %s, want 200 ok: 429s never open the breaker", resp.StatusCode, body))
	}
	res.Ready = ready.Verdict
	m.storm.Store(false)
	given := time.Now()
	if resp, body, _ := get("/ask"); resp.StatusCode != http.StatusOK {
		fail(fmt.Errorf("GET /ask after the storm: %d %s", resp.StatusCode, body))
	}
	res.Recover = time.Since(given)
	t.Logf("llm 429 storm: first answer %s, p50 %s max %s, /ready %s, recovered in %s", res.FirstAnswer, res.AnsweredP50, res.AnsweredMax, res.Ready, res.Recover)
}
