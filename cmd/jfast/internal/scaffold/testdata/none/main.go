// Command orders is a jfast service. `go run .` serves it (see jfast.toml);
// `go run . --help` lists its commands: serve, check, config, worker, migrate
// and drill.
package main

import (
	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
)

// main runs the service's command line; drills.Command adds the drill command
// (remove it to leave the failure drills out of the binary).
func main() {
	cli.Main(Options(), drills.Command)
}

// Options is the service as main compiles it: the plugins it carries (jfast.toml's
// [plugins] enabled chooses which run) and its routes. The tests start the same.
func Options() framework.Options {
	return framework.Options{
		Plugins: []framework.Plugin{},
		Routes:  Routes,
	}
}
