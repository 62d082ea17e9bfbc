package resilience

import (
	"math"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	const cap30 = 30 * time.Second
	for _, tc := range []struct {
		in      string
		max     time.Duration
		d       time.Duration
		ok      bool
		tooLong bool
	}{
		{"0", cap30, 0, true, false},
		{"1", cap30, time.Second, true, false},
		{" 7 ", cap30, 7 * time.Second, true, false},
		{"30", cap30, 30 * time.Second, true, false},
		{"31", cap30, 31 * time.Second, true, true},
		{"120", 0, 120 * time.Second, true, false}, // no cap
		{"99999999999999999999999", cap30, time.Duration(math.MaxInt64), true, true},
		{"Mon, 30 Nov 2026 01:00:05 GMT", cap30, 5 * time.Second, true, false},
		{"Monday, 30-Nov-26 01:00:20 GMT", cap30, 20 * time.Second, true, false},
		{"Mon Nov 30 01:00:10 2026", cap30, 10 * time.Second, true, false},
		{"Mon, 30 Nov 2026 01:01:00 GMT", cap30, time.Minute, true, true},
		{"Sun, 29 Nov 2026 23:00:00 GMT", cap30, 0, true, false}, // past
		{"Thu, 01 Jan 1970 00:00:00 GMT", cap30, 0, true, false}, // far past
		{"", cap30, 0, false, false},
		{"soon", cap30, 0, false, false},
		{"-5", cap30, 0, false, false},
		{"+5", cap30, 0, false, false},
		{"1.5", cap30, 0, false, false},
		{"5s", cap30, 0, false, false},
		{"Mon, 30 Nov 2026 01:00:05 PST", cap30, 0, false, false},
		{"2026-11-30T01:00:05Z", cap30, 0, false, false},
	} {
		d, ok, tooLong := ParseRetryAfter(tc.in, now, tc.max)
		if d != tc.d || ok != tc.ok || tooLong != tc.tooLong {
			t.Errorf("ParseRetryAfter(%q, max %v) = (%v, %v, %v), want (%v, %v, %v)",
				tc.in, tc.max, d, ok, tooLong, tc.d, tc.ok, tc.tooLong)
		}
	}
}
