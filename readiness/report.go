package readiness

import (
	"context"
	"encoding/json"
)

// Status is the outcome of one check.
type Status string

const (
	// Pass means the dependency answered and is usable.
	Pass Status = "pass"
	// Fail means the dependency said no (refused, errored, or its breaker
	// is open) or is impaired.
	Fail Status = "fail"
	// Timeout means the check did not answer within the aggregator's
	// timeout. It is distinct from Fail: a dependency that said no versus
	// one that did not answer.
	Timeout Status = "timeout"
)

// Report is what a check returns, and one entry of the "checks" object in
// the /ready body.
//
// A report with an empty Status is normalised by the aggregator: Healthy
// true becomes Pass, false becomes Fail. Healthy is then made to agree with
// Status (Pass is healthy, anything else is not).
type Report struct {
	// Healthy says whether the dependency is usable.
	Healthy bool `json:"healthy"`
	// Status is Pass, Fail or Timeout.
	Status Status `json:"status"`
	// Detail explains a failure in a sentence that names the dependency.
	// It must hold no secrets (no passwords, no full DSNs): the public
	// /ready serves it to anyone in development without an admin listener
	// (redacted in production and whenever admin_listen is set), and the
	// admin listener's /ready and the status page always show it.
	Detail string `json:"detail,omitempty"`
	// Unreachable, in a check's report, says the failure is that the
	// dependency cannot be reached: it refused, did not answer, or its
	// breaker is open because it did either (an open breaker carries the
	// failures that opened it, so the verdict holds for the whole outage).
	// It is what a plugin declared critical takes the replica out of
	// rotation for. Set it with [Unreachable]; [Impaired] leaves it false.
	// It is not in the /ready body: Critical is.
	Unreachable bool `json:"-"`
	// Critical is the entry's verdict in the /ready body, set by the
	// aggregator (a value a check sets is replaced): true when the check is
	// declared critical by config ([plugin.X] critical = true) and it
	// reported Unreachable, timed out or panicked. See [Aggregator.Run].
	Critical bool `json:"critical"`
	// Meta carries details for operators, such as the breaker state and
	// its retry_after.
	Meta map[string]any `json:"meta,omitempty"`
}

// Passed returns a healthy report.
func Passed(detail string, meta map[string]any) Report {
	return Report{Healthy: true, Status: Pass, Detail: detail, Meta: meta}
}

// Unreachable returns the report of a dependency that cannot be reached: it
// refused, did not answer, or its breaker is open. A plugin declared
// critical takes the replica out of rotation for it (503).
func Unreachable(detail string, meta map[string]any) Report {
	return Report{Healthy: false, Status: Fail, Detail: detail, Unreachable: true, Meta: meta}
}

// Impaired returns the report of a dependency that answers but is not fully
// usable (keys still being fetched, a last delivery that failed while the
// work waits in a queue): degraded, never a reason to leave rotation, even
// for a plugin declared critical.
func Impaired(detail string, meta map[string]any) Report {
	return Report{Healthy: false, Status: Fail, Detail: detail, Meta: meta}
}

// Check is one plugin's readiness check.
type Check struct {
	// Name is the plugin's name and the key of its entry in "checks".
	Name string
	// Critical is declared by config ([plugin.X] critical = true): only a
	// critical check can make the result Unavailable.
	Critical bool
	// Run checks the dependency. It should return when ctx ends; if it
	// does not, the aggregator reports Timeout without waiting for it.
	Run func(ctx context.Context) Report
}

// Overall is the status of the whole /ready result.
type Overall string

const (
	// OK means every check passed. /ready answers 200.
	OK Overall = "ok"
	// Degraded means some check is unhealthy but none critically so.
	// /ready answers 200 so the orchestrator keeps the replica.
	Degraded Overall = "degraded"
	// Unavailable means a check declared critical reported its dependency
	// unreachable, timed out or panicked. /ready answers 503.
	Unavailable Overall = "unavailable"
)

// Result is the outcome of one /ready run. Its JSON form is the body of a
// 200 answer: {"status": "degraded", "verdict": "degraded", "checks": {...}}
// (status repeats the verdict there; the 503 answer is a problem+json whose
// status is the number 503, so clients read verdict). It decodes from
// either answer.
type Result struct {
	// Status is the verdict: OK, Degraded or Unavailable.
	Status Overall
	// Checks holds one entry per check, by name.
	Checks map[string]Report
}

// resultJSON is the 200 body.
type resultJSON struct {
	Status  Overall           `json:"status"`
	Verdict Overall           `json:"verdict"`
	Checks  map[string]Report `json:"checks"`
}

// MarshalJSON encodes r as the body of a 200 answer.
func (r Result) MarshalJSON() ([]byte, error) {
	checks := r.Checks
	if checks == nil {
		checks = map[string]Report{}
	}
	return json.Marshal(resultJSON{Status: r.Status, Verdict: r.Status, Checks: checks})
}

// UnmarshalJSON decodes a /ready body, a 200 answer or the 503 problem:
// the verdict member, else a status that is a string.
func (r *Result) UnmarshalJSON(data []byte) error {
	var v struct {
		Status  json.RawMessage   `json:"status"`
		Verdict Overall           `json:"verdict"`
		Checks  map[string]Report `json:"checks"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	r.Status, r.Checks = v.Verdict, v.Checks
	if r.Status == "" && len(v.Status) > 0 && v.Status[0] == '"' {
		if err := json.Unmarshal(v.Status, &r.Status); err != nil {
			return err
		}
	}
	return nil
}

// Redacted returns the result as a public listener serves it: the overall
// status and each check's healthy, status and critical, without detail and
// meta. A check's detail ("redis unreachable at 10.0.0.7:6379") and meta are
// for operators; the status per plugin is what a load balancer or a client
// needs. The HTTP status is unchanged.
func (r Result) Redacted() Result {
	out := Result{Status: r.Status, Checks: make(map[string]Report, len(r.Checks))}
	for name, rep := range r.Checks {
		out.Checks[name] = Report{Healthy: rep.Healthy, Status: rep.Status, Critical: rep.Critical}
	}
	return out
}

// HTTPStatus returns the status /ready answers for r: 503 for Unavailable,
// 200 otherwise.
func (r Result) HTTPStatus() int {
	if r.Status == Unavailable {
		return 503
	}
	return 200
}
