package idempotency

import (
	"os"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

// private is this test run's private database.
var private *jfasttest.Database

func TestMain(m *testing.M) {
	os.Exit(jfasttest.MainWithDatabase(m, "idempotency", &private))
}

// testURL is the private database's connection string, through addr when not empty.
func testURL(addr string) string {
	if addr == "" {
		return private.URL()
	}
	return private.URLVia(addr)
}
