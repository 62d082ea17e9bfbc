package channels

import (
	"fmt"
	"strings"
	"testing"
)

// A tracestate within 512 characters is kept as it is; a longer one (a
// publishing request's caller may send 32 members of 513 characters) loses
// its members over 128 characters first, then members from the end, until
// it fits; with none left there is no tracestate.
func TestTraceStateIsCutToW3CsLength(t *testing.T) {
	member := func(i, n int) string { return fmt.Sprintf("k%02d=%s", i, strings.Repeat("v", n)) }
	var small, big []string
	for i := range 40 {
		small = append(small, member(i, 20)) // 24 characters each
		big = append(big, member(i, 300))
	}
	mixed := append([]string{member(0, 300)}, small[1:4]...)
	for _, tc := range []struct {
		name, in, want string
		kept           bool
	}{
		{"short", strings.Join(small[:3], ","), strings.Join(small[:3], ","), true},
		{"long members go first", strings.Join(mixed, ",") + "," + strings.Repeat("x", 600), strings.Join(small[1:4], ","), true},
		{"then from the end", strings.Join(small, ","), strings.Join(small[:20], ","), true},
		{"nothing left", strings.Join(big, ","), "", false},
	} {
		md := map[string]string{"traceparent": "00-1-2-01", "tracestate": tc.in}
		trimTraceState(md)
		got, ok := md["tracestate"]
		if ok != tc.kept || got != tc.want || len(got) > maxTraceState || md["traceparent"] != "00-1-2-01" {
			t.Errorf("%s: tracestate %q (present %v), want %q (present %v)", tc.name, got, ok, tc.want, tc.kept)
		}
	}
}
