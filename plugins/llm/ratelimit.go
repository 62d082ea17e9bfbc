package llm

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// rateLimitWait returns how long a 429 asks to wait, from the first of:
//
//   - retry-after-ms: milliseconds, which OpenAI and Azure OpenAI send;
//   - Retry-After: seconds or an HTTP date (RFC 9110);
//   - x-ratelimit-reset-requests and x-ratelimit-reset-tokens: when the
//     exhausted limit refills, as a Go-style duration ("1s", "6m0s",
//     "20ms"). A limit whose x-ratelimit-remaining-* says it is not
//     exhausted is skipped; of the others, the longest wait wins (both
//     must have refilled for the call to pass).
//
// ok is false when no header says anything usable.
func rateLimitWait(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if d, ok, _ := resilience.ParseRetryAfter(h.Get("Retry-After"), now, 0); ok {
		return d, true
	}
	for _, limit := range [...]string{"requests", "tokens"} {
		if rem := strings.TrimSpace(h.Get("X-Ratelimit-Remaining-" + limit)); rem != "" && rem != "0" {
			continue
		}
		v := strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + limit))
		if v == "" {
			continue
		}
		r, err := time.ParseDuration(v)
		if err != nil {
			// Some providers send bare seconds ("1.5").
			secs, ferr := strconv.ParseFloat(v, 64)
			if ferr != nil || secs < 0 || secs > float64(math.MaxInt64/int64(time.Second)) {
				continue
			}
			r = time.Duration(secs * float64(time.Second))
		}
		if r >= 0 && (!ok || r > d) {
			d, ok = r, true
		}
	}
	return d, ok
}
