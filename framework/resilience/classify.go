package resilience

import (
	"context"
	"errors"
)

// HTTPOutcome is the breaker outcome of one HTTP exchange, the rule every
// jfast plugin that calls over HTTP shares (DESIGN.md §3): a failure is
// evidence that the upstream is not there.
//
//   - err != nil: [Ignore] when it is (or wraps) context.Canceled — the
//     caller gave up — and [Failure] otherwise (transport errors and
//     timeouts, including context.DeadlineExceeded).
//   - 502, 503, 504: [Failure].
//   - 429 and 500: [Ignore]. A 500 proves the upstream is up (with a bug the
//     same request will meet again); a 429 asks for calm, and an open
//     breaker would turn it into an outage.
//   - anything else: [Success].
func HTTPOutcome(status int, err error) Outcome {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return Ignore
		}
		return Failure
	}
	switch status {
	case 502, 503, 504:
		return Failure
	case 429, 500:
		return Ignore
	}
	return Success
}
