package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/problem"
)

// endsWithoutDone answers 200 with an event stream of texts that ends
// without "data: [DONE]": the body is closed cleanly, as a provider or a
// proxy on the way that gives up in the middle of an answer does.
func endsWithoutDone(texts ...string) answer {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, t := range texts {
			_, _ = io.WriteString(w, chunk(t))
		}
	}
}

// A stream whose body ends without [DONE] before any chunk is no answer: the
// attempt failed, as a reset would, and is made again; the retry's chunks
// are read.
func TestStreamEndedWithoutDoneBeforeAnyChunkIsRetried(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{endsWithoutDone(), p.streamAnswer(false, "ok")}
	c := client(t, p, llm.ProviderConfig{}, autoClock())
	s, err := c.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(s); got != "ok" || s.Err() != nil || s.Attempts() != 2 {
		t.Fatalf("read %q (err %v) in %d attempts, want ok in 2", got, s.Err(), s.Attempts())
	}
}

// With one attempt, an empty stream and a JSON body sent to a stream request
// are the call's error: a 503 naming the provider, counted by the breaker.
func TestStreamWithoutAnAnswerIsAnError(t *testing.T) {
	t.Parallel()
	jsonBody := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`)
	}
	for name, a := range map[string]answer{"empty": endsWithoutDone(), "json": jsonBody} {
		p := newProvider(t, a)
		c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, autoClock())
		s, err := c.ChatStream(context.Background(), params("hi"))
		if s != nil {
			t.Fatalf("%s: a stream (%d chunks), want an error", name, s.Chunks())
		}
		e := llmError(t, err)
		pr, _ := problem.As(err)
		if e.Kind != llm.KindUnavailable || pr.Status != 503 || pr.Extensions["dependency"] != "primary" ||
			pr.Detail != "model provider 'primary' ended the stream without an answer" {
			t.Fatalf("%s: %v, problem %+v; want a 503 naming primary: ended without an answer", name, err, pr)
		}
		if b := c.Breaker().Snapshot(); b.Consecutive != 1 {
			t.Fatalf("%s: breaker %+v, want the failure counted", name, b)
		}
	}
}

// A stream whose body ends without [DONE] after its chunks is cut, not
// finished: the caller has the chunks, then an error; nothing is retried,
// and the breaker counts the failure.
func TestStreamEndedWithoutDoneAfterChunksIsCut(t *testing.T) {
	t.Parallel()
	p := newProvider(t, endsWithoutDone("a", "b"))
	c := client(t, p, llm.ProviderConfig{}, autoClock())
	s, err := c.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(s)
	e := llmError(t, s.Err())
	if got != "ab" || e.Kind != llm.KindUnavailable || e.Chunks != 2 || p.Requests() != 1 {
		t.Fatalf("read %q then %+v after %d requests; want ab, then unavailable after 2 chunks, 1 request", got, e, p.Requests())
	}
	if pr, _ := problem.As(s.Err()); pr.Status != 503 || pr.Detail != "model provider 'primary' cut the stream after 2 chunks" {
		t.Fatalf("problem %+v, want a 503: cut after 2 chunks", pr)
	}
	if b := c.Breaker().Snapshot(); b.Consecutive != 1 && b.State == resilience.StateClosed {
		t.Fatalf("breaker %+v, want the cut counted", b)
	}
}

// Relayed, a stream cut that way ends with an error event, never with a
// [DONE] the provider did not send.
func TestRelayStreamEndedWithoutDoneEndsWithErrorEvent(t *testing.T) {
	t.Parallel()
	p := newProvider(t, endsWithoutDone(secretAnswer))
	svc := startService(t, p, nil, "attempts = 1\n")
	r := svc.Do(t, http.MethodPost, "/stream", "")
	events := sseData(r.String())
	if r.Status != 200 || len(events) != 2 || !strings.Contains(events[0], secretAnswer) || !strings.Contains(r.String(), "event: error") || strings.Contains(r.String(), "[DONE]") {
		t.Fatalf("/stream: %d %q; want the chunk then an error event, no [DONE]", r.Status, r)
	}
	var pr map[string]any
	if err := json.Unmarshal([]byte(events[1]), &pr); err != nil || pr["status"] != float64(503) || pr["dependency"] != "primary" {
		t.Fatalf("error event %q, want a 503 problem naming primary", events[1])
	}
}
