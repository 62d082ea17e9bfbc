package readiness

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Handler returns the /ready handler: it runs the checks with the request's
// context and answers the [Result] as JSON, 200 for OK and Degraded, 503 for
// Unavailable, with Cache-Control: no-store so no proxy serves a stale
// answer.
func (a *Aggregator) Handler() http.Handler { return a.handler(false) }

// RedactedHandler is [Aggregator.Handler] for a listener anyone may reach: the
// same status code and overall status, and each check's healthy, status and
// critical, without its detail and meta, which may name hosts, ports, users or
// databases (see [Result.Redacted]).
func (a *Aggregator) RedactedHandler() http.Handler { return a.handler(true) }

func (a *Aggregator) handler(redact bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := a.Run(r.Context())
		if redact {
			res = res.Redacted()
		}
		body, err := json.Marshal(res)
		if err != nil {
			// Only a check's Meta can fail to encode (a channel, a func);
			// answer without the meta rather than not at all.
			for name, rep := range res.Checks {
				rep.Meta = nil
				res.Checks[name] = rep
			}
			body, _ = json.Marshal(res)
		}
		writeJSON(w, res.HTTPStatus(), body)
	})
}

var liveBody = []byte(`{"status":"ok"}`)

// LiveHandler returns the /live handler: 200 {"status":"ok"} while the
// process serves. It touches no dependency, so an outage never gets a
// replica restarted.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, liveBody)
	})
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
