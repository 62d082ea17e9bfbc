package auth_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test: the JWKS
// refresh loop and its fetches must stop with the App.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
