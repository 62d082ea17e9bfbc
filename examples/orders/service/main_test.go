package service

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
)

// ordersURL and billingURL are this package's private databases, made by
// TestMain: orders' own, and the one of the billing service the tests start
// in-process.
var ordersURL, billingURL string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var drops []func() error
	defer func() {
		for _, drop := range drops {
			if err := drop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	for _, d := range []struct {
		url    *string
		prefix string
	}{{&ordersURL, "jfast_ex_orders"}, {&billingURL, "jfast_ex_orders_billing"}} {
		url, drop, err := exampletest.Database(d.prefix)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		*d.url = url
		drops = append(drops, drop)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}
