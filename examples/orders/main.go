// Command orders is the example service with every dependency: orders in
// PostgreSQL, paid through examples/billing, stock from examples/inventory
// over gRPC and cached in Redis, a confirmation mail through the queue,
// receipts on a storage disk and bearer tokens checked by the auth plugin. It listens on 127.0.0.1:8000.
//
//	go run ./examples/orders              # serve (./jfast.toml, $JFAST_CONFIG, else the compiled-in examples/orders/jfast.toml)
//	go run ./examples/orders token ada    # a development bearer token for subject "ada"
//	go run ./examples/orders check        # validate the configuration
//
// `make run` starts it together with billing, inventory and the gateway
// (scripts/run-examples.sh).
package main

import (
	"context"
	_ "embed"
	"os"
	"os/signal"
	"syscall"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/examples/internal/devconfig"
	"github.com/jfastframework/jfast/examples/orders/service"
	"github.com/jfastframework/jfast/framework/cli"
)

// config is examples/orders/jfast.toml, compiled in so `go run ./examples/orders`
// works from any directory; a ./jfast.toml, $JFAST_CONFIG or --config wins.
//
//go:embed jfast.toml
var config string

func main() {
	opts := service.Options()
	opts.ConfigText = devconfig.Fallback(config)
	root := cli.NewCommand(opts, drills.Command)
	root.AddCommand(tokenCommand(opts))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, root, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
