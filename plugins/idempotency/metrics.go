package idempotency

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework"
)

// Outcomes of a request on a guarded route, the outcome label of
// jfast_idempotency_requests_total.
const (
	outcomeNoKey       = "no_key"            // no Idempotency-Key: ran unguarded
	outcomeInvalidKey  = "invalid_key"       // 400
	outcomeNoSubject   = "no_subject"        // 500: scope caller, and no caller subject
	outcomeTooLarge    = "request_too_large" // 413: over max_request_body or the route's body limit
	outcomeUnreadable  = "body_unreadable"   // 400 (or 408): the body could not be read to its end
	outcomeExecuted    = "executed"          // ran and its response was stored
	outcomeReleased    = "released"          // ran, answered 5xx or 429: key released
	outcomeNotKept     = "not_kept"          // ran, response over max_response_body
	outcomeLost        = "lost"              // ran, but the store did not take the response
	outcomeReplayed    = "replayed"          // stored response sent again
	outcomeInProgress  = "in_progress"       // 409: the first still runs
	outcomeMismatch    = "mismatch"          // 422: same key, other request
	outcomeUnavailable = "store_unavailable" // 503: the store did not answer
)

type metrics struct {
	requests *prometheus.CounterVec
	swept    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: framework.NewCounterVec("jfast_idempotency_requests_total", "Requests on routes guarded by the idempotency plugin, by store and outcome.", "store", "outcome"),
		swept:    framework.NewCounter("jfast_idempotency_swept_total", "Expired idempotency records deleted by the PostgreSQL store's sweep."),
	}
	if err := framework.RegisterAll(reg, m.requests, m.swept); err != nil {
		return nil, err
	}
	return m, nil
}
