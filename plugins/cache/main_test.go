package cache

import (
	"testing"

	"go.uber.org/goleak"
)

// The client's pool, the single-flight computations and the private
// redis-server processes the tests start must all be gone when the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
