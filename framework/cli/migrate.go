package cli

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
)

var migrateDirections = []string{"up", "down", "status"}

func (s *Service) migrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate up|down|status",
		Short: "Apply, revert or show the plugins' schema migrations",
		Long: `Run the migrations of every enabled plugin that has them (the db plugin, with
migrations compiled in by db.WithMigrations):

  up      apply every pending migration
  down    revert the last applied migration
  status  show the applied and pending migrations, changing nothing

The configuration is validated first, as check does; plugins are not started.`,
		Example:   fmt.Sprintf("  %[1]s migrate status\n  JFAST_DB_URL=postgres://app@db/app %[1]s migrate up", s.name),
		ValidArgs: migrateDirections,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return UsageError("%s: want one of up, down or status", cmd.CommandPath())
			}
			if !slices.Contains(migrateDirections, args[0]) {
				return UsageError("%s: unknown direction %q; want up, down or status", cmd.CommandPath(), args[0])
			}
			return nil
		},
		RunE: s.migrate,
	}
}

// migrate calls every enabled [framework.Migrator] (see its doc for the contract).
func (s *Service) migrate(cmd *cobra.Command, args []string) error {
	app, migrators, err := loadPluginsThat[framework.Migrator](s, cmd, "migrate: no enabled plugin has migrations", "enable the db plugin and compile migrations in with db.WithMigrations")
	if err != nil {
		return err
	}
	if s.opts.StandIn {
		// The jfast binary: a service's migrations are compiled into the
		// service, never into jfast.
		bin, _ := serviceBinary(app)
		fmt.Fprintf(cmd.ErrOrStderr(), "migrate: the jfast binary carries no service's migrations (a service compiles its own in with db.WithMigrations); run the service's: `%s migrate %s`\n", bin, args[0])
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
