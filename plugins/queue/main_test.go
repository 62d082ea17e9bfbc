package queue_test

import (
	"os"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

// redisAddr is the machine's Redis. Tests share it with other suites: every test
// uses queues of its own (asynq keys are per queue) and deletes them after.
const redisAddr = "127.0.0.1:6379"

// testDB is this test run's private database, made by TestMain (a worker child
// process gets its name from the environment).
var testDB = os.Getenv(childDBEnv)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	var private *jfasttest.Database
	os.Exit(jfasttest.MainWithDatabase(m, "queue", &private, func(d *jfasttest.Database) { testDB = d.Name }))
}

// pgURL is the private database, reached at addr.
func pgURL(addr string) string {
	return "postgres://postgres@" + addr + "/" + testDB + "?sslmode=disable"
}
