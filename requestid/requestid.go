package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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

// NewContext returns a copy of ctx that carries id.
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the request ID stored in ctx by [NewContext], or ""
// when there is none.
func FromContext(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}
