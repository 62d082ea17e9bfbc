package framework

import (
	"net/http"
	"testing"
	"time"
)

func TestCallerTimeout(t *testing.T) {
	t.Parallel()
	const own = 30 * time.Second
	for _, tc := range []struct {
		value   []string
		want    time.Duration
		expired bool
	}{
		{nil, own, false},
		{[]string{"250"}, 250 * time.Millisecond, false},
		{[]string{" 250 "}, 250 * time.Millisecond, false},
		{[]string{"30000"}, own, false},
		{[]string{"9223372036854775807"}, own, false}, // never overflows into a short deadline
		{[]string{"1"}, time.Millisecond, false},
		{[]string{"0"}, own, true},
		{[]string{"-5"}, own, true},
		{[]string{"1.5"}, own, false}, // not a whole number: ignored
		{[]string{""}, own, false},
		{[]string{"soon"}, own, false},
	} {
		h := http.Header{}
		if tc.value != nil {
			h[TimeoutHeader] = tc.value
		}
		got, expired := callerTimeout(h, own)
		if got != tc.want || expired != tc.expired {
			t.Errorf("%s: %q: (%s, %v), want (%s, %v)", TimeoutHeader, tc.value, got, expired, tc.want, tc.expired)
		}
	}
}
