package framework

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/jfastframework/jfast/requestid"
)

// FuzzRequestID: whatever a client sends as X-Request-ID, the ID the request
// carries and echoes is a valid one (printable ASCII, bounded), it is the
// client's exactly when that one is valid, and it writes as a single header
// line that reads back unchanged (no header or log-line injection).
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{
		"", "req-1", "0123456789abcdef0123456789abcdef", "a b", "x\r\nSet-Cookie: a=b", "\x00", "caf\xc3\xa9",
		string(bytes.Repeat([]byte("a"), requestid.MaxLen)), string(bytes.Repeat([]byte("a"), requestid.MaxLen+1)),
		`"quoted"`, "{json}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, inbound string) {
		h := http.Header{}
		c := newRequestValues(context.Background(), inbound, h, nil)
		id := requestid.FromContext(c)
		if !requestid.Valid(id) {
			t.Fatalf("inbound %q gave the invalid ID %q", inbound, id)
		}
		if (id == inbound) != requestid.Valid(inbound) {
			t.Fatalf("inbound %q (valid %v) gave %q", inbound, requestid.Valid(inbound), id)
		}
		if got := h.Get(requestid.Header); got != id {
			t.Fatalf("response header %q, context %q", got, id)
		}
		var wire bytes.Buffer
		if err := h.Write(&wire); err != nil {
			t.Fatal(err)
		}
		if want := "X-Request-Id: " + id + "\r\n"; wire.String() != want {
			t.Fatalf("header written as %q, want %q", wire.String(), want)
		}
	})
}
