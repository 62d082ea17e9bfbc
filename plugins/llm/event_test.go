package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/problem"
)

// errorEvent answers 200 with an event stream of texts, then an error event
// whose "error" member is errJSON, as a provider whose stream fails after it
// started answering sends it.
func errorEvent(errJSON string, texts ...string) answer {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, t := range texts {
			_, _ = io.WriteString(w, chunk(t))
		}
		_, _ = io.WriteString(w, `data: {"error":`+errJSON+"}\n\n")
	}
}

// flagged is an OpenAI-style content-filter error whose message quotes the
// prompt, as a provider's refusal may.
var flagged = `{"message":"the prompt '` + secretPrompt + `' was flagged","type":"invalid_request_error","code":"content_filter","param":null}`

// streamErr calls c.ChatStream and reads the stream to its end: it returns
// the call's error, or the stream's.
func streamErr(c *llm.Client) error {
	s, err := c.ChatStream(context.Background(), params(secretPrompt))
	if err != nil {
		return err
	}
	defer s.Close()
	readAll(s)
	return s.Err()
}

// noPrompt fails the test when err's text, or that of any error its
// Unwrap chain holds, quotes the prompt.
func noPrompt(t *testing.T, name string, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), secretPrompt) {
			t.Errorf("%s: %T in the error's chain quotes the provider's message, and with it the prompt: %s", name, e, e)
		}
	}
}

// A provider's own message may quote the prompt: neither a status it
// answered nor an error event in its stream (before or after chunks)
// brings that message into the error's text or into any error its Unwrap
// chain holds, which is what the framework logs. The cause names the
// status the event stands for.
func TestErrorTextHoldsNoProviderMessage(t *testing.T) {
	t.Parallel()
	quoting := func(code int) answer {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, `{"error":`+flagged+`}`)
		}
	}
	one := llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 1}}
	for _, tc := range []struct {
		name   string
		a      answer
		stream bool
		want   string
	}{
		{"plain 400", quoting(400), false, "llm: model provider 'primary' refused the request (answered 400): the provider answered 400 Bad Request"},
		{"plain 500", quoting(500), false, "llm: model provider 'primary' is failing (answered 500, 1 attempts): the provider answered 500 Internal Server Error"},
		{"event before any chunk", errorEvent(flagged), true,
			"llm: model provider 'primary' refused the request with an error event (as a 400): the provider sent an error event standing for 400 Bad Request"},
		{"event after a chunk", errorEvent(flagged, "x"), true,
			"llm: model provider 'primary' refused the request with an error event after 1 chunks (as a 400): the provider sent an error event standing for 400 Bad Request"},
		{"server error event after a chunk", errorEvent(`{"message":"`+secretPrompt+`","type":"server_error"}`, "x"), true,
			"llm: model provider 'primary' cut the stream with an error event after 1 chunks: the provider sent an error event of no known refusal or rate-limit type"},
		{"string error event", errorEvent(`"` + secretPrompt + `"`), true,
			"llm: model provider 'primary' cut the stream with an error event: the provider sent an error event of no known refusal or rate-limit type"},
	} {
		c := client(t, newProvider(t, tc.a), one, autoClock())
		var err error
		if tc.stream {
			err = streamErr(c)
		} else {
			_, err = c.Chat(context.Background(), params(secretPrompt))
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %q, want %q", tc.name, err, tc.want)
		}
		noPrompt(t, tc.name, err)
	}
}

// An error event is classified by its code, or else its type: a refusal
// (invalid_request_error, content_filter…) is a 4xx refusal — a 502, never
// retried, a breaker success, so a prompt the provider's filter refuses
// never opens the breaker for every other call; a rate limit is a 429 —
// retried, a breaker success; anything else (server_error, an Anthropic
// overloaded_error, an "error" that is no object) is the provider failing —
// a 503, retried, a breaker failure.
func TestStreamErrorEventIsClassifiedByTypeAndCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		event    string
		kind     llm.Kind
		status   int // the *llm.Error's StatusCode
		problem  int
		requests int // of one call, with attempts = 2
		opens    bool
	}{
		{`{"message":"flagged","type":"invalid_request_error","code":"content_filter"}`, llm.KindStatus, 400, 502, 1, false},
		{`{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}`, llm.KindStatus, 400, 502, 1, false},
		{`{"message":"no","type":"invalid_request_error"}`, llm.KindStatus, 400, 502, 1, false},
		{`{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}`, llm.KindRateLimited, 429, 503, 2, false},
		{`{"message":"slow down","type":"rate_limit_error"}`, llm.KindRateLimited, 429, 503, 2, false},
		{`{"message":"oops","type":"server_error","code":null}`, llm.KindUnavailable, 0, 503, 2, true},
		{`{"type":"overloaded_error","message":"Overloaded"}`, llm.KindUnavailable, 0, 503, 2, true},
		{`"something broke"`, llm.KindUnavailable, 0, 503, 2, true},
	} {
		p := newProvider(t, errorEvent(tc.event))
		c := client(t, p, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 2,
			BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, autoClock())
		err := streamErr(c)
		e := llmError(t, err)
		pr, _ := problem.As(err)
		var ev *llm.EventError
		if e.Kind != tc.kind || e.StatusCode != tc.status || pr.Status != tc.problem || p.Requests() != tc.requests || !errors.As(err, &ev) {
			t.Errorf("%s: %+v (problem %d) after %d requests; want %s, status %d, problem %d after %d, an *llm.EventError cause",
				tc.event, e, pr.Status, p.Requests(), tc.kind, tc.status, tc.problem, tc.requests)
		}
		if open := c.Breaker().Snapshot().State == resilience.StateOpen; open != tc.opens {
			t.Errorf("%s: breaker open %v, want %v", tc.event, open, tc.opens)
		}
	}
}

// Six calls refused by the provider's content filter in their stream, with
// the default policy: one request each, and the breaker stays closed for
// the provider's other calls.
func TestStreamRefusalEventsNeverOpenTheBreaker(t *testing.T) {
	t.Parallel()
	p := newProvider(t, errorEvent(flagged))
	c := client(t, p, llm.ProviderConfig{}, autoClock())
	for i := range 6 {
		if e := llmError(t, streamErr(c)); e.Kind != llm.KindStatus {
			t.Fatalf("call %d: %+v, want a refusal", i, e)
		}
	}
	if n, b := p.Requests(), c.Breaker().Snapshot(); n != 6 || b.State != resilience.StateClosed {
		t.Fatalf("%d requests, breaker %+v; want 6 requests and the breaker closed", n, b)
	}
}

// Through the service, a stream refused by an error event quoting the
// prompt is a 502 problem naming the provider; the prompt is in no log
// line, no span (attribute, event or status) and not in the answer, and the
// span carries no HTTP status the provider did not answer.
func TestServiceStreamErrorEventLogsNoPrompt(t *testing.T) {
	t.Parallel()
	svc := startService(t, newProvider(t, errorEvent(flagged)), nil, "attempts = 1\n")
	r := svc.Do(t, http.MethodPost, "/stream", "")
	if r.Status != http.StatusBadGateway || !strings.Contains(r.String(), `"upstream":"primary"`) || strings.Contains(r.String(), secretPrompt) {
		t.Fatalf("/stream: %d %s; want a 502 naming primary, without the prompt", r.Status, r)
	}
	if l := svc.Logs(); strings.Contains(l, secretPrompt) {
		t.Errorf("the logs hold the prompt:\n%s", l)
	}
	for _, s := range svc.spans(t) {
		text := fmt.Sprint(s.Attributes, s.Events, s.Status)
		if strings.Contains(text, secretPrompt) {
			t.Errorf("span %s holds the prompt: %s", s.Name, text)
		}
		for _, a := range s.Attributes {
			if strings.HasPrefix(s.Name, "chat ") && a.Key == "http.response.status_code" {
				t.Errorf("span %s has %s = %s; the provider answered 200, then the event", s.Name, a.Key, a.Value.String())
			}
		}
	}
}
