package telemetry

import (
	"net/http"
	"slices"
	"strings"
)

// inbound is the carrier a request's trace context is read from, by the W3C
// Trace Context rules for headers a request repeats. net/http keeps every line
// of a repeated header; propagation.HeaderCarrier would read only the first.
//
//   - traceparent is not a list: a request with two lines of it carries no
//     usable parent, and starts a new trace (Get answers "").
//   - tracestate is a list that may be split over lines: the lines are one
//     list, joined with commas; empty (or blank) members are skipped, and a
//     key that repeats keeps its first member only, so one duplicate does not
//     cost the others (the OpenTelemetry parser drops the whole list for it).
type inbound http.Header

const (
	traceparentKey = "Traceparent"
	tracestateKey  = "Tracestate"
)

// Get implements propagation.TextMapCarrier.
func (c inbound) Get(key string) string {
	switch key = http.CanonicalHeaderKey(key); key {
	case traceparentKey:
		if lines := c[key]; len(lines) == 1 {
			return lines[0]
		}
		return ""
	case tracestateKey:
		return joinTracestate(c[key])
	}
	return http.Header(c).Get(key)
}

// Set implements propagation.TextMapCarrier; extraction never sets.
func (c inbound) Set(key, value string) { http.Header(c).Set(key, value) }

// Keys implements propagation.TextMapCarrier.
func (c inbound) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// joinTracestate is the tracestate list the lines make together, without
// empty members or repeated keys. One line without a comma, the usual case,
// is returned as it is.
func joinTracestate(lines []string) string {
	if len(lines) == 1 && !strings.Contains(lines[0], ",") {
		return lines[0]
	}
	var b strings.Builder
	var keys []string
	for _, line := range lines {
		for member := range strings.SplitSeq(line, ",") {
			member = strings.Trim(member, " \t")
			if member == "" {
				continue
			}
			key, _, _ := strings.Cut(member, "=")
			if slices.Contains(keys, key) {
				continue
			}
			keys = append(keys, key)
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(member)
		}
	}
	return b.String()
}
