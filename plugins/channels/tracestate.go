package channels

import (
	"slices"
	"strings"
)

// maxTraceState is the most of a tracestate a message carries: W3C Trace
// Context's 512 characters, the length every vendor must pass on. A
// publishing request's tracestate is its caller's to set, and may be far
// longer (32 members of 513 characters); it goes into every stream entry,
// and catch-up pages are sized by what an entry takes (entryOverhead).
const maxTraceState = 512

// trimTraceState cuts md's tracestate to maxTraceState as W3C Trace
// Context recommends when a vendor must truncate: members longer than 128
// characters go first, then members from the end; none left, and there is
// no tracestate.
func trimTraceState(md map[string]string) {
	ts, ok := md["tracestate"]
	if !ok || len(ts) <= maxTraceState {
		return
	}
	members := slices.DeleteFunc(strings.Split(ts, ","), func(m string) bool { return len(strings.TrimSpace(m)) > 128 })
	for len(members) > 0 && len(strings.Join(members, ",")) > maxTraceState {
		members = members[:len(members)-1]
	}
	if len(members) == 0 {
		delete(md, "tracestate")
		return
	}
	md["tracestate"] = strings.Join(members, ",")
}
