package problem

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/jfastframework/jfast/requestid"
)

// Write sends p as the response: Content-Type application/problem+json,
// Retry-After when p.RetryAfter is positive, the headers in p.Header, the
// status and the body. An empty Instance becomes the request's escaped path and an
// empty RequestID the request ID in r's context; p itself is not modified.
// A nil p writes [Internal].
func Write(w http.ResponseWriter, r *http.Request, p *Problem) {
	if p == nil {
		p = Internal()
	}
	out := *p
	if out.Instance == "" && r != nil && r.URL != nil {
		out.Instance = instance(r.URL.EscapedPath())
	}
	if out.RequestID == "" && r != nil {
		out.RequestID = requestid.FromContext(r.Context())
	}
	status := out.status()
	if status < 100 || status > 999 {
		status = http.StatusInternalServerError
		out.Status = status
	}

	body, err := out.MarshalJSON()
	if err != nil {
		// Only an extension value can fail to marshal (a channel, a func).
		// That is a programming error; the client still gets a valid body.
		slog.Error("problem: cannot encode extension members; sending the problem without them",
			"status", status, "error", err)
		out.Extensions = nil
		body, _ = out.MarshalJSON()
	}

	h := w.Header()
	for k, vs := range out.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set("Content-Type", ContentType)
	if out.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(out.RetryAfter), 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError sends the problem that answers err; see [From].
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	Write(w, r, From(err))
}

// instance is an escaped request path as a relative URI reference: a path
// that starts with "//" would be read as an authority (a host), so it gets
// the "/." prefix, which dot-segment removal takes off again (RFC 3986,
// sections 3.3 and 5.2.4).
func instance(path string) string {
	if strings.HasPrefix(path, "//") {
		return "/." + path
	}
	return path
}
