package readiness

import "context"

// Status is the outcome of one check.
type Status string

const (
	// Pass means the dependency answered and is usable.
	Pass Status = "pass"
	// Fail means the dependency said no: refused, errored, or a breaker
	// is open.
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
	// It is served to anyone who can reach /ready, so it must hold no
	// secrets (no passwords, no full DSNs).
	Detail string `json:"detail,omitempty"`
	// Critical, in a check's report, says the failure is critical: the
	// dependency cannot be reached at all, so a restart or a different
	// route could help. An open or half-open breaker is not critical. In
	// the /ready body it is the entry's effective criticality: see
	// [Aggregator.Run].
	Critical bool `json:"critical"`
	// Meta carries details for operators, such as the breaker state and
	// its retry_after.
	Meta map[string]any `json:"meta,omitempty"`
}

// Passed returns a healthy report.
func Passed(detail string, meta map[string]any) Report {
	return Report{Healthy: true, Status: Pass, Detail: detail, Meta: meta}
}

// Failed returns an unhealthy report; critical says whether the failure is
// critical (see [Report.Critical]).
func Failed(detail string, critical bool, meta map[string]any) Report {
	return Report{Healthy: false, Status: Fail, Detail: detail, Critical: critical, Meta: meta}
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
	// Unavailable means a check declared critical failed critically,
	// timed out or panicked. /ready answers 503.
	Unavailable Overall = "unavailable"
)

// Result is the /ready body.
type Result struct {
	Status Overall           `json:"status"`
	Checks map[string]Report `json:"checks"`
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
