package resilience

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// epoch is the start of every test clock: a fixed, unremarkable instant.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
