package readiness_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Checks run on their own goroutines, and a check that ignores its context
// outlives Run: goleak proves every one of them ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
