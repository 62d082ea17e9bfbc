package requestid_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/requestid"
)

func TestNew(t *testing.T) {
	t.Parallel()
	seen := make(map[string]bool)
	for range 1000 {
		id := requestid.New()
		if len(id) != 32 {
			t.Fatalf("New() = %q: want 32 characters, got %d", id, len(id))
		}
		if strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("New() = %q: want lowercase hex only", id)
		}
		if !requestid.Valid(id) {
			t.Fatalf("New() = %q is not Valid", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q within 1000 calls", id)
		}
		seen[id] = true
	}
}

func TestNewAllocations(t *testing.T) {
	// Not parallel: AllocsPerRun is disturbed by other goroutines allocating.
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	if n := testing.AllocsPerRun(100, func() { _ = requestid.New() }); n > 1 {
		t.Fatalf("New() allocates %.0f times per call; want at most 1 (the string)", n)
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"empty", "", false},
		{"one char", "a", true},
		{"uuid", "3f2c8a4e-8b1d-4c55-9d2e-0c7a6b1f9e12", true},
		{"all printable", "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~", true},
		{"128 chars", strings.Repeat("a", 128), true},
		{"129 chars", strings.Repeat("a", 129), false},
		{"space", "abc def", false},
		{"leading space", " abc", false},
		{"tab", "abc\tdef", false},
		{"newline (log injection)", "abc\nlevel=ERROR", false},
		{"carriage return", "abc\r", false},
		{"NUL", "abc\x00", false},
		{"DEL", "abc\x7f", false},
		{"non-ASCII UTF-8", "pedido-ñ", false},
		{"non-ASCII high byte", "abc\xff", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := requestid.Valid(tt.in); got != tt.want {
				t.Errorf("Valid(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if got := requestid.FromContext(ctx); got != "" {
		t.Fatalf("FromContext(empty) = %q, want \"\"", got)
	}
	ctx = requestid.NewContext(ctx, "abc123")
	if got := requestid.FromContext(ctx); got != "abc123" {
		t.Fatalf("FromContext = %q, want abc123", got)
	}
	// A value stored under another key of the same string type must not be
	// mistaken for the request ID.
	type otherKey struct{}
	other := context.WithValue(context.Background(), otherKey{}, "nope")
	if got := requestid.FromContext(other); got != "" {
		t.Fatalf("FromContext(other key) = %q, want \"\"", got)
	}
	// The innermost ID wins.
	ctx = requestid.NewContext(ctx, "inner")
	if got := requestid.FromContext(ctx); got != "inner" {
		t.Fatalf("FromContext after a second NewContext = %q, want inner", got)
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = requestid.New()
	}
}

func BenchmarkValid(b *testing.B) {
	id := requestid.New()
	b.ReportAllocs()
	for b.Loop() {
		_ = requestid.Valid(id)
	}
}
