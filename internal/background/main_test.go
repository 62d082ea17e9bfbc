package background

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a task's goroutine outlives its test:
// Stop must wait for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
