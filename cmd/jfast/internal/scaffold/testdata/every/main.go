// Command shop is a jfast service. `go run .` serves it (see jfast.toml);
// `go run . --help` lists its commands: serve, check, config, worker, migrate
// and drill, and token (a development bearer token).
package main

import (
	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/idempotency"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// main runs the service's command line; drills.Command adds the drill command
// (remove it to leave the failure drills out of the binary), tokenCommand
// the token command (token.go).
func main() {
	cli.Main(Options(), drills.Command, tokenCommand)
}

// Options is the service as main compiles it: the plugins it carries (jfast.toml's
// [plugins] enabled chooses which run) and its routes. The tests start the same.
func Options() framework.Options {
	return framework.Options{
		Plugins: []framework.Plugin{
			http.New(),
			db.New(),
			cache.New(),
			auth.New(),
			storage.New(),
			queue.New(),
			mail.New(),
			telemetry.New(),
			idempotency.New(),
			grpc.New(),
		},
		Routes: Routes,
	}
}
