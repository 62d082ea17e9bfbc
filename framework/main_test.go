package framework_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(holdPortEnv) == "1" {
		holdPort()
		return
	}
	goleak.VerifyTestMain(m)
}
