package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The drain watcher, the proxied calls' goroutines and the WebSocket copies
// must all be gone when the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
