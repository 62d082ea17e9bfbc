package framework

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/spf13/cobra"
)

// WorkerRunner is a plugin that runs background workers, such as the queue
// plugin's job consumers. The service's "worker" command runs only these: it starts
// the enabled plugins as serve does, runs the service's Routes function into a
// router that is not served (so job handlers registered there exist), serves only
// /live, /ready, /metrics and the plugins' own routes on app.listen (so the
// orchestrator can probe the worker), and calls RunWorkers on every enabled
// WorkerRunner, concurrently.
//
// RunWorkers is called after every plugin has started. It processes work until ctx
// is done, then stops taking new work, lets the work in flight finish within the
// plugin's own bound, and returns nil. An error return ends the worker process (exit
// status 1) after the other runners and the plugins are stopped. Whether the same
// plugin also runs workers inside "serve" is the plugin's configuration to decide.
type WorkerRunner interface {
	Plugin
	RunWorkers(ctx context.Context) error
}

func (c *cli) workerCommand(name string) *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run only the plugins' background workers (queue consumers)",
		Long: `Run only the background workers of the enabled plugins that have them (the
queue plugin's job consumers), without the service's own routes. /live, /ready and
/metrics are still served on app.listen for the orchestrator; give a worker its own
address (JFAST_APP_LISTEN) when it shares a host with the service.

Exits 1 saying so when no enabled plugin runs workers.`,
		Example: fmt.Sprintf("  %[1]s worker\n  JFAST_APP_LISTEN=127.0.0.1:8001 %[1]s worker --config jfast.toml", name),
		Args:    noArgs,
		RunE:    c.worker,
	}
}

func (c *cli) worker(cmd *cobra.Command, _ []string) error {
	c2 := *c
	if routes := c.opts.Routes; routes != nil {
		// Routes still runs, into a router nobody serves: it is where handlers
		// take their clients and register job handlers (queue.Handle), which a
		// worker needs; the worker serves only the probes and /metrics.
		c2.opts.Routes = func(app *App, _ chi.Router) error { return routes(app, chi.NewRouter()) }
	}
	app, err := c2.load(cmd)
	if err != nil {
		return err
	}
	var runners []WorkerRunner
	for _, p := range app.plugins {
		if w, ok := p.(WorkerRunner); ok {
			runners = append(runners, w)
		}
	}
	if len(runners) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "worker: no enabled plugin runs workers (enabled: %s); enable the queue plugin in [plugins] enabled to run jobs\n", strings.Join(pluginNames(app.plugins), ", "))
		return reported
	}
	ctx := cmd.Context()
	if err := app.Start(ctx); err != nil {
		app.Logger().Error("worker failed to start", slog.String("error", err.Error()))
		return reported
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, len(runners))
	for i, r := range runners {
		wg.Go(func() {
			if err := r.RunWorkers(ctx); err != nil {
				errs[i] = fmt.Errorf("workers of %s: %w", r.Name(), err)
				cancel() // one runner failing stops the process
			}
		})
	}
	app.Logger().Info("workers running", slog.Any("plugins", pluginNames(runnersAsPlugins(runners))))
	wg.Wait()
	cancel()
	err = errors.Join(append(errs, app.Stop(context.WithoutCancel(ctx)))...)
	if err != nil {
		app.Logger().Error("worker stopped with an error", slog.String("error", err.Error()))
		return reported
	}
	return nil
}

func pluginNames(ps []Plugin) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name()
	}
	return names
}

func runnersAsPlugins(rs []WorkerRunner) []Plugin {
	ps := make([]Plugin, len(rs))
	for i, r := range rs {
		ps[i] = r
	}
	return ps
}
