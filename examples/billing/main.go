// Command billing is the sibling service of examples/orders: invoices and
// idempotent payments in PostgreSQL, on 127.0.0.1:8010.
//
//	go run ./examples/billing            # serve (jfast.toml of the working directory, else this one)
//	go run ./examples/billing migrate up # or let migrate_on_start do it at boot
//
// `make run` starts it together with orders (scripts/run-examples.sh).
package main

import (
	_ "embed"

	"github.com/jfastframework/jfast/examples/billing/service"
	"github.com/jfastframework/jfast/examples/internal/devconfig"
	"github.com/jfastframework/jfast/framework/cli"
)

// config is examples/billing/jfast.toml, compiled in so `go run ./examples/billing`
// works from any directory; a ./jfast.toml, $JFAST_CONFIG or --config wins.
//
//go:embed jfast.toml
var config string

func main() {
	opts := service.Options()
	opts.ConfigText = devconfig.Fallback(config)
	cli.Main(opts)
}
