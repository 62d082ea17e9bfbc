package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"unsafe"
)

// Header is the HTTP header that carries the request ID in and out.
const Header = "X-Request-ID"

// MaxLen is the longest inbound request ID [Valid] accepts. 128 characters
// holds any UUID, ULID or trace-style ID with room to spare, while keeping a
// hostile client from stuffing kilobytes into every log line.
const MaxLen = 128

// New returns a fresh request ID: 16 bytes from crypto/rand as 32 lowercase
// hex characters.
func New() string {
	var b [16]byte
	// crypto/rand.Read never returns an error on supported platforms (Go ≥ 1.24
	// crashes the program instead), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	var out [32]byte
	hex.Encode(out[:], b[:])
	return string(out[:])
}

// Valid reports whether s is acceptable as an inbound request ID: 1 to
// [MaxLen] bytes, each printable ASCII other than space (0x21 to 0x7e). This
// keeps IDs safe to echo in a header and to write unquoted in a log line.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

type ctxKey struct{}

// entry is what a context carries: the ID, and the one-element slice the
// response header points at, allocated together so serving a request pays for
// one allocation instead of three (ID, header slice, boxed string).
type entry struct {
	id     string
	header [1]string
	raw    [16]byte
	buf    [32]byte
}

// NewContext returns a copy of ctx that carries id.
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &entry{id: id})
}

// Serve returns ctx carrying the request ID for an inbound request: the
// inbound one when [Valid], else a fresh one from [New]; it sets the ID on the
// response header h. This is the framework's hot path: one allocation for the
// ID and its header value, one for the context.
func Serve(ctx context.Context, inbound string, h http.Header) (context.Context, string) {
	e := &entry{}
	if Valid(inbound) {
		e.id = inbound
	} else {
		_, _ = rand.Read(e.raw[:])
		hex.Encode(e.buf[:], e.raw[:])
		// e.buf is never written again, so the string may share it.
		e.id = unsafe.String(&e.buf[0], len(e.buf))
	}
	e.header[0] = e.id
	h[canonicalHeader] = e.header[:]
	return context.WithValue(ctx, ctxKey{}, e), e.id
}

// canonicalHeader is Header in the form net/http stores it, so map access
// needs no canonicalisation.
const canonicalHeader = "X-Request-Id"

// Inbound returns the request ID a client sent, without allocating.
func Inbound(h http.Header) string {
	if v := h[canonicalHeader]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// FromContext returns the request ID stored in ctx by [NewContext], or ""
// when there is none.
func FromContext(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	if e, ok := ctx.Value(ctxKey{}).(*entry); ok {
		return e.id
	}
	return ""
}
