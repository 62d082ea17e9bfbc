package telemetry_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// rawGet sends a GET with header lines written exactly as given (repeated
// names stay repeated lines) over a raw connection, and reads the answer.
func rawGet(t *testing.T, addr, path string, lines ...string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + strings.Join(lines, "\r\n") + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
}

// The trace context a request carries is read by the W3C Trace Context rules
// for repeated headers, from requests written byte for byte.
func TestInboundTraceContextFollowsW3C(t *testing.T) {
	t.Parallel()
	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		parent  = "00-" + traceID + "-b7ad6b7169203331-01"
		other   = "00-1bf7651916cd43dd8448eb211c80319d-c7ad6b7169203332-01"
	)
	tests := []struct {
		name      string
		lines     []string
		continues bool   // the span is in traceID's trace, child of the parent
		state     string // the tracestate the span carries
	}{
		{"one line each", []string{"traceparent: " + parent, "tracestate: a=1,b=2"}, true, "a=1,b=2"},
		{"tracestate over two lines", []string{"traceparent: " + parent, "tracestate: a=1", "tracestate: b=2"}, true, "a=1,b=2"},
		{"an empty tracestate line and blank members", []string{"traceparent: " + parent, "tracestate: a=1", "tracestate: ", "tracestate: b=2, ,\tc=3,"}, true, "a=1,b=2,c=3"},
		{"a duplicated key drops only the duplicate", []string{"traceparent: " + parent, "tracestate: a=1,b=2,a=3"}, true, "a=1,b=2"},
		{"a duplicate across lines", []string{"traceparent: " + parent, "tracestate: a=1", "tracestate: b=2,a=3"}, true, "a=1,b=2"},
		{"two traceparent lines start a new trace", []string{"traceparent: " + parent, "traceparent: " + other, "tracestate: a=1"}, false, ""},
		{"the same traceparent twice is still two lines", []string{"traceparent: " + parent, "traceparent: " + parent}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _ := startB(t, withTelemetry)
			rawGet(t, b.Addr(), "/invoices/1", tt.lines...)
			s := find(t, b.spans(t), "GET /invoices/{id}")
			continued := s.SpanContext.TraceID().String() == traceID && s.Parent.IsRemote() && s.Parent.SpanID().String() == "b7ad6b7169203331"
			if continued != tt.continues {
				t.Errorf("trace %s, parent %s (remote %v): continued = %v, want %v",
					s.SpanContext.TraceID(), s.Parent.SpanID(), s.Parent.IsRemote(), continued, tt.continues)
			}
			if !tt.continues && (s.Parent.IsValid() || s.SpanContext.TraceID().String() == "1bf7651916cd43dd8448eb211c80319d") {
				t.Errorf("two traceparent lines: the span joined a trace (%s, parent %s)", s.SpanContext.TraceID(), s.Parent.SpanID())
			}
			if got := s.SpanContext.TraceState().String(); got != tt.state {
				t.Errorf("tracestate = %q, want %q", got, tt.state)
			}
		})
	}
}
