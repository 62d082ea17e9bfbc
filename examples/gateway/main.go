// Command gateway is the edge in front of examples/orders and
// examples/billing, on 127.0.0.1:8090: /api/orders/… goes to orders,
// /api/billing/… to billing and /api/events to orders' event stream, each
// through the http plugin's upstream with its deadlines, retries and breaker.
//
//	go run ./examples/gateway            # serve (jfast.toml of the working directory, else this one)
//
// `make run` starts it together with orders and billing
// (scripts/run-examples.sh).
package main

import (
	_ "embed"

	"github.com/jfastframework/jfast/examples/internal/devconfig"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/plugins/gateway"
	"github.com/jfastframework/jfast/plugins/http"
)

// config is examples/gateway/jfast.toml, compiled in so `go run
// ./examples/gateway` works from any directory; a ./jfast.toml,
// $JFAST_CONFIG or --config wins.
//
//go:embed jfast.toml
var config string

// options is the gateway as main compiles it; the test starts the same.
func options() framework.Options {
	return framework.Options{Plugins: []framework.Plugin{http.New(), gateway.New()}}
}

func main() {
	opts := options()
	opts.ConfigText = devconfig.Fallback(config)
	cli.Main(opts)
}
