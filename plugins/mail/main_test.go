package mail_test

import (
	"os"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

// private is this run's private database, where the queue (postgres backend)
// keeps jobs. Tests share it; each works a queue of its own, so no App runs
// another test's deliveries.
var private *jfasttest.Database

func TestMain(m *testing.M) { os.Exit(jfasttest.MainWithDatabase(m, "mail", &private)) }

func dbURL() string { return private.URL() }
