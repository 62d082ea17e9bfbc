package llm

import (
	"net/http"
	"testing"
)

// The transport never takes a proxy from the environment (HTTP_PROXY,
// HTTPS_PROXY): it would see every request with its API key. Only the
// proxy key names one.
func TestTransportProxy(t *testing.T) {
	t.Parallel()
	cfg := ProviderConfig{Name: "p", BaseURL: "https://api.example.com/v1", Model: "m"}.withDefaults()
	if tr := newTransport(cfg); tr.Proxy != nil {
		t.Errorf("without the proxy key the transport has a Proxy func: the environment's would be used")
	}
	cfg.Proxy = "http://user:pw@proxy.internal:3128"
	req, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/chat/completions", nil)
	u, err := newTransport(cfg).Proxy(req)
	if err != nil || u == nil || u.Host != "proxy.internal:3128" {
		t.Errorf("with proxy set: %v, %v; want proxy.internal:3128", u, err)
	}
}

// The stream's end is seen in the lines of the body however the reads cut
// them, as an event-stream parser reads a data field: "data:", one optional
// space, then a value starting with [DONE]; a last line needs no line break.
func TestStreamWatchSeesDone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reads []string
		done  bool
	}{
		{[]string{"data: [DONE]\n\n"}, true},
		{[]string{"data:[DONE]\r\n"}, true},
		{[]string{"data: [DONE]\r"}, true},
		{[]string{"da", "ta: [DO", "NE]", "\n"}, true},
		{[]string{`data: {"choices":[]}` + "\n\n", "data: [DONE]"}, true}, // at the end of the body
		{[]string{"data: [DONE]x\n"}, true},                               // as the SDK reads it: a prefix
		{[]string{`data: {"choices":[]}` + "\n\n"}, false},
		{[]string{"data:  [DONE]\n"}, false}, // two spaces: the value is " [DONE]"
		{[]string{"xdata: [DONE]\n"}, false},
		{[]string{": data: [DONE]\n"}, false}, // a comment
		{[]string{"data: [DON", "\nE]\n"}, false},
		{[]string{`{"id":"chatcmpl-1"}`}, false}, // a JSON body, not an event stream
		{nil, false},
	} {
		w := &streamWatch{}
		for _, r := range tc.reads {
			w.scan([]byte(r))
		}
		w.endLine() // what the body's end does
		if w.done != tc.done {
			t.Errorf("reads %q: done = %v, want %v", tc.reads, w.done, tc.done)
		}
	}
}
