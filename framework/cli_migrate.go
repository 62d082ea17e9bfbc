package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Migrator is a plugin with schema migrations, such as the db plugin's embedded
// SQL migrations. The service's "migrate up|down|status" command calls it.
//
// RunMigrations is called on a plugin that has been configured and validated
// (framework.New) but not started: it opens what it needs itself, bounded by ctx.
// direction is "up" (apply every pending migration), "down" (revert the last one)
// or "status" (change nothing). It writes what it did and where the schema stands
// to out, one line per migration, for a person to read; secrets never appear in
// out or in the error.
type Migrator interface {
	Plugin
	RunMigrations(ctx context.Context, direction string, out io.Writer) error
}

var migrateDirections = []string{"up", "down", "status"}

func (c *cli) migrateCommand(name string) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Apply, revert or show the plugins' schema migrations",
		Long: `Run the migrations of every enabled plugin that has them (the db plugin, with
migrations compiled in by db.WithMigrations):

  up      apply every pending migration
  down    revert the last applied migration
  status  show the applied and pending migrations, changing nothing

The configuration is validated first, as check does; plugins are not started.`,
		Example:   fmt.Sprintf("  %[1]s migrate status\n  JFAST_DB_URL=postgres://app@db/app %[1]s migrate up", name),
		ValidArgs: migrateDirections,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("%s: want one of up, down or status", cmd.CommandPath())
			}
			for _, d := range migrateDirections {
				if args[0] == d {
					return nil
				}
			}
			return usageErrorf("%s: unknown direction %q; want up, down or status", cmd.CommandPath(), args[0])
		},
		RunE: c.migrate,
	}
}

func (c *cli) migrate(cmd *cobra.Command, args []string) error {
	app, err := c.load(cmd)
	if err != nil {
		return err
	}
	var migrators []Migrator
	for _, p := range app.plugins {
		if m, ok := p.(Migrator); ok {
			migrators = append(migrators, m)
		}
	}
	if len(migrators) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "migrate: no enabled plugin has migrations (enabled: %s); enable the db plugin and compile migrations in with db.WithMigrations\n", strings.Join(pluginNames(app.plugins), ", "))
		return reported
	}
	var errs []error
	for _, m := range migrators {
		fmt.Fprintf(cmd.OutOrStdout(), "%s: migrate %s\n", m.Name(), args[0])
		if err := m.RunMigrations(cmd.Context(), args[0], cmd.OutOrStdout()); err != nil {
			errs = append(errs, fmt.Errorf("%s: migrate %s: %w", m.Name(), args[0], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &ExitError{Code: 1, Err: err}
	}
	return nil
}
