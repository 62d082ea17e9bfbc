// Command orders is a jfast service. `go run .` serves it (see jfast.toml);
// `go run . --help` lists its commands: serve, check, config, worker, migrate.
package main

import (
	"github.com/jfastframework/jfast/framework"
)

func main() {
	framework.Main(Options())
}

// Options is the service as main compiles it: the plugins it carries (jfast.toml's
// [plugins] enabled chooses which run) and its routes. The tests start the same.
func Options() framework.Options {
	return framework.Options{
		Plugins: []framework.Plugin{},
		Routes:  Routes,
	}
}
