package service

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// dbURL is this package's private database, made by TestMain.
var dbURL string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	url, drop, err := exampletest.Database("jfast_ex_billing")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dbURL = url
	code := m.Run()
	if err := drop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}
