package statuspage_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The services, upstreams and browser the tests start must be gone when
// they end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
