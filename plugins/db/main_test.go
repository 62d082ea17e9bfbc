package db

import (
	"os"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
)

// adminURL reaches the machine's PostgreSQL (trust auth).
var adminURL = jfasttest.PostgresAdminURL()

// private is this test run's private database; testDB is its name.
var (
	private *jfasttest.Database
	testDB  string
)

func TestMain(m *testing.M) {
	os.Exit(jfasttest.MainWithDatabase(m, "db", &private, func(d *jfasttest.Database) { testDB = d.Name }))
}

// testURL is the private database's connection string.
func testURL() string { return private.URL() }

// urlVia is the private database reached through addr (a drills.Proxy).
func urlVia(addr string) string { return private.URLVia(addr) }
