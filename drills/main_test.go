package drills

import (
	"testing"

	"go.uber.org/goleak"
)

// The scenarios (a real App per dependency) are in drills/scenarios: they import
// the framework, which imports this package for the drill command.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
