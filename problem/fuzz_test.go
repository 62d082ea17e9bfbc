package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jfastframework/jfast/problem"
)

// FuzzWrite renders problems built from arbitrary text on arbitrary request
// targets: the body is always one JSON object with the standard members in
// their types, the status is a valid one, the text survives the trip when it is
// UTF-8, and instance is a URI reference (no space, no control character).
func FuzzWrite(f *testing.F) {
	for _, c := range []struct {
		target, title, detail, key, value string
		status                            int
	}{
		{"/orders/1", "", "no such order", "dependency", "db", 503},
		{"/a%20b?x=1", "Custom", "with \"quotes\" and \\", "upstream", "billing", 502},
		{"/%zz", "", "", "type", "overridden?", 0},
		{"/caf%C3%A9/%FF", "\x00\x1f", "\u2028</script>", "retry_after", "7", 429},
		{"/", "", "", "", "", 99},
		{"/x", "t", "d", "errors", "[]", 1000},
	} {
		f.Add(c.target, c.title, c.detail, c.key, c.value, c.status)
	}
	f.Fuzz(func(t *testing.T, target, title, detail, key, value string, status int) {
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(target, "/") {
			return // net/http would not have served it
		}
		r := httptest.NewRequest(http.MethodGet, "http://example.test/", nil)
		r.URL, r.RequestURI = u, target
		p := &problem.Problem{Title: title, Status: status, Detail: detail}
		if key != "" {
			p.Extensions = map[string]any{key: value}
		}
		w := httptest.NewRecorder()
		problem.Write(w, r, p)

		if w.Code < 100 || w.Code > 999 {
			t.Fatalf("status %d written", w.Code)
		}
		if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
			t.Fatalf("Content-Type %q", ct)
		}
		var body struct {
			Type     string `json:"type"`
			Title    string `json:"title"`
			Status   int    `json:"status"`
			Detail   string `json:"detail"`
			Instance string `json:"instance"`
		}
		dec := json.NewDecoder(w.Body)
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			t.Fatalf("body is not a problem object: %v\n%s", err, w.Body.String())
		}
		if dec.More() {
			t.Fatalf("more than one JSON value in the body")
		}
		if body.Status != w.Code || body.Type == "" || body.Title == "" {
			t.Fatalf("body %+v for status %d", body, w.Code)
		}
		if utf8.ValidString(detail) && body.Detail != detail {
			t.Fatalf("detail %q came back %q", detail, body.Detail)
		}
		if utf8.ValidString(title) && title != "" && body.Title != title {
			t.Fatalf("title %q came back %q", title, body.Title)
		}
		if strings.ContainsFunc(body.Instance, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
			t.Fatalf("instance %q is not a URI reference", body.Instance)
		}
		if _, err := url.Parse(body.Instance); err != nil {
			t.Fatalf("instance %q does not parse: %v", body.Instance, err)
		}
		if want := u.EscapedPath(); body.Instance != want && body.Instance != "/."+want {
			t.Fatalf("instance %q, want the escaped path %q", body.Instance, want)
		}
	})
}

// FuzzUnmarshal decodes arbitrary bytes as a problem (an upstream's body):
// it never panics, and what it accepts marshals again to a problem that
// decodes to the same standard members.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"type":"about:blank","title":"Service Unavailable","status":503,"dependency":"db"}`,
		`{"status":"503"}`, `{"title":null}`, `[]`, `{"errors":[{"field":"a","detail":"b"}],"x":1e400}`,
		`{"type":1}`, `{}`, `{"detail":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p problem.Problem
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		out, err := json.Marshal(&p)
		if err != nil {
			return // an extension json cannot encode again (none known), reported by Write
		}
		var back problem.Problem
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-encoded problem does not decode: %v\n%s", err, out)
		}
		if p.Status != 0 && back.Status != p.Status || back.Detail != p.Detail || back.Instance != p.Instance ||
			p.Title != "" && back.Title != p.Title || p.Type != "" && back.Type != p.Type {
			t.Fatalf("round trip changed the problem:\n%+v\n%+v", p, back)
		}
	})
}
