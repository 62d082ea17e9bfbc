package resilience

import (
	"math"
	"strings"
	"time"
)

// httpDateLayouts are the three HTTP-date forms RFC 9110 §5.6.7 tells a
// recipient to accept: IMF-fixdate, then the obsolete RFC 850 and asctime.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",
	"Monday, 02-Jan-06 15:04:05 GMT",
	"Mon Jan _2 15:04:05 2006",
}

// ParseRetryAfter parses a Retry-After header value (RFC 9110 §10.2.3):
// either delta-seconds ("120") or an HTTP-date, read relative to now.
//
// ok is false when v is neither (garbage, a negative or fractional number).
// A date in the past gives 0. tooLong is true when the wait is over maxWait (a
// maxWait of zero or less means no cap); d is then still the wait asked for
// (saturated at the largest Duration), so the caller can report it, and a
// client returns the response instead of waiting.
func ParseRetryAfter(v string, now time.Time, maxWait time.Duration) (d time.Duration, ok bool, tooLong bool) {
	v = strings.Trim(v, " \t")
	if v == "" {
		return 0, false, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var secs uint64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false, false
			}
			if secs <= math.MaxInt64/uint64(time.Second) {
				secs = secs*10 + uint64(c-'0')
			}
		}
		if secs > math.MaxInt64/uint64(time.Second) {
			d = time.Duration(math.MaxInt64)
		} else {
			d = time.Duration(secs) * time.Second
		}
	} else {
		var t time.Time
		var err error
		for _, layout := range httpDateLayouts {
			if t, err = time.Parse(layout, v); err == nil {
				break
			}
		}
		if err != nil {
			return 0, false, false
		}
		d = max0(t.Sub(now))
	}
	return d, true, maxWait > 0 && d > maxWait
}

func max0(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}
