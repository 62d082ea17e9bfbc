package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/plugins/queue"
)

// errNoHandlers is why the jfast binary runs no jobs: a job's handler is
// registered by the service's own code (queue.Handle in its routes), which the
// binary does not carry, so a worker of the binary would take the service's
// jobs from its queues and fail them ("no handler for kind"), spending their
// attempts, or run the kinds a stand-in plugin registers (mail.send) without
// the service's options.
var errNoHandlers = errors.New("the jfast binary has none of a service's job handlers (they are registered by the service's own code), " +
	"so it runs no jobs: a worker would take the service's jobs and fail them; " +
	"a worker is the service's own binary: run `go run . worker` in the service's directory (or its built binary's worker command)")

// standInQueue is the queue plugin as the jfast binary runs it: it enqueues,
// checks and inspects like the service's, and never works a queue. "serve"
// starts it with workers off; "worker" is refused (refuseWorker), so RunWorkers
// is not reached, and returns errNoHandlers if it is.
type standInQueue struct{ *queue.Plugin }

// Start starts the queue plugin with its workers off, and says so in the log
// when the file has them on.
func (q standInQueue) Start(ctx context.Context, app *framework.App) error {
	if cfg, ok := q.Config().(*queue.Config); ok && cfg.Workers {
		cfg.Workers = false
		app.Logger().Info("queue workers not started: "+errNoHandlers.Error(),
			slog.String("plugin", queue.Name))
	}
	return q.Plugin.Start(ctx, app)
}

// RunWorkers refuses: see errNoHandlers.
func (q standInQueue) RunWorkers(context.Context) error { return errNoHandlers }

// refuseWorker makes root's worker command refuse before it loads anything:
// the jfast binary has no job handlers of a service (errNoHandlers).
func refuseWorker(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "worker" {
			continue
		}
		c.Short = "Refused: a worker is the service's own binary (the jfast binary has no job handlers)"
		c.Long = `"jfast worker" runs nothing: ` + errNoHandlers.Error() + `.`
		c.Example = "  go run . worker    # in the service's directory"
		c.RunE = func(*cobra.Command, []string) error {
			return &cli.ExitError{Code: 1, Err: errors.New("jfast worker: " + errNoHandlers.Error())}
		}
	}
}
