package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
)

func (s *Service) workerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run only the plugins' background workers (queue consumers)",
		Long: `Run only the background workers of the enabled plugins that have them (the
queue plugin's job consumers), without the service's own routes. /live, /ready and
/metrics are still served on app.listen for the orchestrator; give a worker its own
address (JFAST_APP_LISTEN) when it shares a host with the service.

Exits 1 saying so when no enabled plugin runs workers.`,
		Example: fmt.Sprintf("  %[1]s worker\n  JFAST_APP_LISTEN=127.0.0.1:8001 %[1]s worker --config jfast.toml", s.name),
		Args:    NoArgs,
		RunE:    s.worker,
	}
}

// worker runs every enabled [framework.WorkerRunner] (see its doc for the contract).
func (s *Service) worker(cmd *cobra.Command, _ []string) error {
	s2 := *s
	if routes := s.opts.Routes; routes != nil {
		// Routes still runs, into a router nobody serves: it is where handlers
		// take their clients and register job handlers (queue.Handle), which a
		// worker needs; the worker serves only the probes and /metrics.
		s2.opts.Routes = func(app *framework.App, _ chi.Router) error { return routes(app, chi.NewRouter()) }
	}
	app, runners, err := loadPluginsThat[framework.WorkerRunner](&s2, cmd, "worker: no enabled plugin runs workers", workerFix(s.opts.Plugins))
	if err != nil {
		return err
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
	app.Logger().Info("workers running", slog.Any("plugins", pluginNames(runners)))
	wg.Wait()
	cancel()
	err = errors.Join(append(errs, app.Stop(context.WithoutCancel(ctx)))...)
	if err != nil {
		app.Logger().Error("worker stopped with an error", slog.String("error", err.Error()))
		return reported
	}
	return nil
}

// workerFix is the fix when no enabled plugin runs workers: enable the ones
// compiled in that do, or, when none is (enabling one would only be refused as
// not compiled in), compile the queue plugin in.
func workerFix(compiled []framework.Plugin) string {
	var names []string
	for _, p := range compiled {
		if _, ok := p.(framework.WorkerRunner); ok {
			names = append(names, fmt.Sprintf("%q", p.Name()))
		}
	}
	if len(names) == 0 {
		return `no plugin compiled into this service runs workers: to run jobs, import "github.com/jfastframework/jfast/plugins/queue", add queue.New() to the plugins in main, and enable "queue" in [plugins] enabled`
	}
	return "enable " + strings.Join(names, " or ") + " in [plugins] enabled to run jobs"
}
