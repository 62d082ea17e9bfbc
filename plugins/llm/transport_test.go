package llm_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/llm"
)

// The proxy key sends every request through the proxy named, which sees
// the API key (which is why the environment's proxy is never used).
func TestExplicitProxy(t *testing.T) {
	t.Parallel()
	var seen atomic.Pointer[http.Request]
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r)
		complete("via the proxy")(w, r)
	}))
	t.Cleanup(proxy.Close)
	c := client(t, nil, llm.ProviderConfig{BaseURL: "http://models.example/v1", APIKey: "sk-test", Proxy: proxy.URL}, autoClock())
	resp, err := c.Chat(context.Background(), params("hi"))
	if err != nil || resp.Text() != "via the proxy" {
		t.Fatalf("%v %v", resp, err)
	}
	r := seen.Load()
	if r == nil || r.URL.Host != "models.example" || r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("the proxy got %+v", r)
	}
}

// With address_guard a provider whose name resolves into this network is
// refused before anything is sent (the key never leaves); allow_hosts lets
// a named host through; without the guard a model server on loopback (a
// self-hosted one) is called as configured.
func TestAddressGuard(t *testing.T) {
	t.Parallel()
	p := newProvider(t, complete("ok"))
	byName := strings.Replace(p.URL(), "127.0.0.1", "localhost", 1)
	guarded := client(t, nil, llm.ProviderConfig{BaseURL: byName, APIKey: "sk-test", AddressGuard: true}, autoClock())
	for range 3 {
		_, err := guarded.Chat(context.Background(), params("hi"))
		var e *llm.Error
		if !errors.Is(err, egress.ErrAddressNotAllowed) || !strings.Contains(err.Error(), "address_guard") || !errors.As(err, &e) {
			t.Fatalf("err = %v, want an *llm.Error wrapping ErrAddressNotAllowed with the way out", err)
		}
		if e.Kind != llm.KindUnavailable || e.Attempts != 1 {
			t.Errorf("kind %s after %d attempts, want unavailable after 1 (a refused address is not retried)", e.Kind, e.Attempts)
		}
	}
	if s := guarded.Breaker().Snapshot(); s.WindowCalls != 0 || s.Consecutive != 0 {
		t.Errorf("the refusals counted for the breaker: %+v", s)
	}
	if p.Requests() != 0 {
		t.Fatalf("the provider got %d requests", p.Requests())
	}
	for name, cfg := range map[string]llm.ProviderConfig{
		"allow_hosts names it": {BaseURL: byName, AddressGuard: true, AllowHosts: []string{"localhost"}},
		"no guard":             {BaseURL: byName},
	} {
		c := client(t, nil, cfg, autoClock())
		if resp, err := c.Chat(context.Background(), params("hi")); err != nil || resp.Text() != "ok" {
			t.Errorf("%s: %v %v", name, resp, err)
		}
	}
}

// A chunk whose JSON a provider sends over several data lines — one of them
// empty, one holding a bare CR — reaches the client as one event: each
// line its own "data:" line, so nothing a provider sends can end the event
// early or add an event, id or retry field. The content "a\nb" and the text
// of an event: and id: attempt inside it arrive as sent.
func TestRelayMultiLineEvent(t *testing.T) {
	t.Parallel()
	const content = "a\nb\n\nevent: injected\nid: 7\nretry: 1"
	quoted, _ := json.Marshal(content)
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk",`+"\n"+
			"data: \n"+
			`data: "created":1,`+"\r"+`"model":"test-model",`+"\n"+
			`data: "choices":[{"index":0,"delta":{"content":`+string(quoted)+`},"finish_reason":null}]}`+"\n\n"+
			usageChunk+"data: [DONE]\n\n")
	})
	svc := startService(t, p, nil, "")
	resp, err := http.Post(svc.URL+"/stream", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := readEvents(t, resp.Body)
	if len(events) != 3 || events[2].data != "[DONE]" {
		t.Fatalf("events %q, want the chunk, the usage chunk and [DONE]", events)
	}
	for _, e := range events {
		if e.event != "" || e.id != "" || e.other != "" {
			t.Errorf("an event carries fields beyond data: %+v", e)
		}
	}
	var ch struct {
		Choices []struct {
			Delta struct{ Content string } `json:"delta"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(events[0].data), &ch); err != nil || len(ch.Choices) != 1 || ch.Choices[0].Delta.Content != content {
		t.Fatalf("the chunk %q: %v, want its content intact", events[0].data, err)
	}
}

type sseEvent struct{ event, id, data, other string }

// readEvents parses an event stream as a browser does (WHATWG HTML,
// "Interpreting an event stream"): lines end at CRLF, LF or CR; a blank
// line dispatches; data lines join with LF.
func readEvents(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	b, err := io.ReadAll(bufio.NewReader(r))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
	var out []sseEvent
	var cur sseEvent
	var data []string
	has := false
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			if has {
				cur.data = strings.Join(data, "\n")
				out = append(out, cur)
			}
			cur, data, has = sseEvent{}, nil, false
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "":
		case "data":
			data, has = append(data, value), true
		case "event":
			cur.event, has = value, true
		case "id":
			cur.id, has = value, true
		default:
			cur.other, has = cur.other+line, true
		}
	}
	return out
}

// The proxy key is a secret: `jfast config` masks it (it may carry
// credentials).
func TestProxyKeyMasked(t *testing.T) {
	t.Parallel()
	svc, err := jfasttest.New(t, jfasttest.Options{TOML: primaryTable + "proxy = \"http://user:hunter2@proxy.internal:3128\"\n", Plugins: []framework.Plugin{llm.New()}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := svc.WriteEffectiveConfig(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "hunter2") || !strings.Contains(b.String(), "proxy") {
		t.Errorf("the effective config shows the proxy's credentials, or no proxy:\n%s", b.String())
	}
}
