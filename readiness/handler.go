package readiness

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jfastframework/jfast/problem"
)

// Handler returns the /ready handler: it runs the checks with the request's
// context and answers with Cache-Control: no-store, so no proxy serves a
// stale answer:
//
//   - OK and Degraded: 200, application/json, the [Result] as JSON
//     ({"status": "degraded", "verdict": "degraded", "checks": {...}});
//   - Unavailable: 503, application/problem+json (RFC 9457): type, title,
//     status 503, a detail naming the critical checks that failed, instance
//     and request_id, and the extension members verdict ("unavailable")
//     and checks.
func (a *Aggregator) Handler() http.Handler { return a.handler(false) }

// RedactedHandler is [Aggregator.Handler] for a listener anyone may reach: the
// same status code and verdict, and each check's healthy, status and
// critical, without its detail and meta, which may name hosts, ports, users or
// databases (see [Result.Redacted]). The 503's detail names the critical
// checks that failed (their names are in the body anyway).
func (a *Aggregator) RedactedHandler() http.Handler { return a.handler(true) }

func (a *Aggregator) handler(redact bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := a.Run(r.Context())
		if redact {
			res = res.Redacted()
		}
		if _, err := json.Marshal(res.Checks); err != nil {
			// Only a check's Meta can fail to encode (a channel, a func);
			// answer without the meta rather than not at all.
			for name, rep := range res.Checks {
				rep.Meta = nil
				res.Checks[name] = rep
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		if res.Status == Unavailable {
			problem.Write(w, r, unavailableProblem(res))
			return
		}
		body, _ := json.Marshal(res) // the checks encode: made sure above
		writeJSON(w, http.StatusOK, body)
	})
}

// unavailableProblem is the 503 answer's problem: its detail names every
// entry that counts against readiness, in name order.
func unavailableProblem(res Result) *problem.Problem {
	var failed []string
	for name, rep := range res.Checks {
		if rep.Critical && !rep.Healthy {
			failed = append(failed, name)
		}
	}
	slices.Sort(failed)
	detail := "critical check failed: "
	if len(failed) > 1 {
		detail = "critical checks failed: "
	}
	return &problem.Problem{
		Status:     http.StatusServiceUnavailable,
		Detail:     detail + strings.Join(failed, ", "),
		Extensions: map[string]any{"verdict": res.Status, "checks": res.Checks},
	}
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
