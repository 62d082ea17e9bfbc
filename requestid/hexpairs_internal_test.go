package requestid

import (
	"encoding/hex"
	"testing"
)

// Make writes each random byte as encoding/hex would.
func TestHexPairs(t *testing.T) {
	t.Parallel()
	for b := range 256 {
		got := string([]byte{byte(hexPairs[b]), byte(hexPairs[b] >> 8)})
		if want := hex.EncodeToString([]byte{byte(b)}); got != want {
			t.Errorf("byte %#x: %q, want %q", b, got, want)
		}
	}
}
