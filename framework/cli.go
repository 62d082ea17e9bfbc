package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// The service's command line is built with github.com/spf13/cobra: the Go
// ecosystem's usual library for commands with subcommands, generated --help with
// examples, and shell completion, so a jfast service's CLI behaves like the other
// Go tools its operators use.

// ExitError is an error with the exit status the command line ends with. Commands
// return it for usage mistakes (Code 2) and for failures already reported to the
// user (Code 1, Err nil or already printed).
type ExitError struct {
	Code int
	Err  error
	// Usage marks a command-line mistake: the usage hint is printed after Err.
	Usage bool
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageErrorf is a command-line mistake: exit status 2.
func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...), Usage: true}
}

// reported is a failure whose message was already printed: exit status 1.
var reported = &ExitError{Code: 1}

// cli holds what every command of a service's command line shares: the Options
// main compiled in and the persistent flags.
type cli struct {
	opts   Options
	config string
	color  string
}

// NewCommand returns a service's command line for opts, with these commands:
//
//	serve            run the service (the default when no command is given)
//	check            validate the configuration: 0 valid, 1 invalid, 2 usage
//	config           print the effective configuration as TOML, with the source of every value
//	worker           run only the plugins' workers (see [WorkerRunner])
//	migrate up|down|status   run the plugins' migrations (see [Migrator])
//	drill            take each dependency away from the running service and back
//
// Every command takes --config PATH and --color auto|always|never, and has --help
// with an example. Output goes to the command's OutOrStdout and ErrOrStderr; run it
// with [RunCommand] to get the exit status. Tools add their own subcommands to the
// returned command (the jfast binary adds new and version).
func NewCommand(opts Options) *cobra.Command {
	c := &cli{opts: opts}
	name := filepath.Base(os.Args[0])
	if name == "" || name == "." {
		name = "service"
	}
	root := &cobra.Command{
		Use:   name + " [command]",
		Short: "A jfast service",
		Long: `A jfast service. Without a command it serves (the same as "serve").

The configuration is --config PATH, else $JFAST_CONFIG, else ./jfast.toml when it
exists; JFAST_<SECTION>_<KEY> variables override it (deploy keys win over the file,
shape keys lose to it).`,
		Example: fmt.Sprintf(`  %[1]s                         # serve with ./jfast.toml
  %[1]s check --config prod.toml  # validate and exit 0 (valid) or 1 (invalid)
  %[1]s config                    # the effective configuration and where each value came from`, name),
		Args:          cobra.NoArgs,
		RunE:          c.serve,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&c.config, "config", opts.ConfigFile, "configuration file (default $JFAST_CONFIG, else ./jfast.toml if present)")
	root.PersistentFlags().StringVar(&c.color, "color", "auto", "colour in messages: auto (only on a terminal, unless NO_COLOR is set), always or never")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: 2, Err: err, Usage: true}
	})
	root.CompletionOptions.HiddenDefaultCmd = true

	root.AddCommand(
		&cobra.Command{
			Use:   "serve",
			Short: "Run the service (the default command)",
			Long: `Run the service: validate the configuration, start the enabled plugins in
dependency order, mount the routes and listen on app.listen until SIGINT or SIGTERM,
then drain in-flight requests and stop the plugins in reverse order.`,
			Example: fmt.Sprintf("  %[1]s serve --config jfast.toml\n  JFAST_APP_LISTEN=0.0.0.0:8000 %[1]s serve", name),
			Args:    noArgs,
			RunE:    c.serve,
		},
		&cobra.Command{
			Use:   "check",
			Short: "Validate the configuration and exit",
			Long: `Validate the configuration exactly as the service's boot does, without starting
anything or connecting to any dependency. Every problem is printed, one line each
with its key, the rule and the fix, then a count.

Exit status: 0 valid, 1 invalid, 2 command-line mistake.`,
			Example: fmt.Sprintf("  %[1]s check\n  %[1]s check --config deploy/production.toml", name),
			Args:    noArgs,
			RunE:    c.check,
		},
		&cobra.Command{
			Use:   "config",
			Short: "Print the effective configuration with the source of every value",
			Long: `Print the effective configuration as TOML: the [app] table, [plugins] and the
table of every enabled plugin, every key with its value and, as a trailing comment,
where the value came from: default, file, or the environment variable's name.
Secrets (passwords, secrets, tokens, private and signing keys, and the password
inside any URL) are shown as "***". An invalid configuration prints its errors and
exits 1, as check does.`,
			Example: fmt.Sprintf("  %[1]s config\n  JFAST_DB_URL=postgres://app:pw@db/app %[1]s config --config jfast.toml", name),
			Args:    noArgs,
			RunE:    c.printConfig,
		},
		c.workerCommand(name),
		c.migrateCommand(name),
		c.drillCommand(name),
	)
	return root
}

// noArgs refuses positional arguments as a usage mistake (exit status 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s: unexpected argument %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// RunCommand executes root with args and returns the exit status: 0 on success, 1
// when the command failed (its message already printed), 2 for a command-line
// mistake (unknown command or flag, wrong arguments), with a hint to --help.
func RunCommand(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SilenceErrors = true
	root.SilenceUsage = true
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var exit *ExitError
	if !errors.As(err, &exit) {
		// cobra's own errors: unknown command, wrong number of arguments.
		msg := err.Error()
		if strings.HasPrefix(msg, "unknown command") || strings.Contains(msg, "arg(s)") || strings.Contains(msg, "flag") {
			exit = &ExitError{Code: 2, Err: err, Usage: true}
		} else {
			exit = &ExitError{Code: 1, Err: err}
		}
	}
	if exit.Err != nil {
		prefix := "error: "
		if f := root.PersistentFlags().Lookup("color"); f != nil && (&cli{color: f.Value.String()}).useColor(stderr) {
			prefix = ansiRed + "error:" + ansiReset + " "
		}
		fmt.Fprintln(stderr, prefix+exit.Err.Error())
	}
	if exit.Usage {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exit.Code
}

// options returns the Options for one run: the --config flag and the command's
// error stream as the log output unless main chose one.
func (c *cli) options(cmd *cobra.Command) Options {
	o := c.opts
	o.ConfigFile = c.config
	if o.LogOutput == nil {
		o.LogOutput = cmd.ErrOrStderr()
	}
	return o
}

// load builds the App, printing configuration errors in the human form.
func (c *cli) load(cmd *cobra.Command) (*App, error) {
	switch c.color {
	case "auto", "always", "never":
	default:
		return nil, usageErrorf("--color must be auto, always or never, got %q", c.color)
	}
	app, err := New(c.options(cmd))
	if err != nil {
		var errs ConfigErrors
		if errors.As(err, &errs) {
			writeConfigErrors(cmd.ErrOrStderr(), errs, c.useColor(cmd.ErrOrStderr()))
			return nil, reported
		}
		return nil, &ExitError{Code: 1, Err: err}
	}
	return app, nil
}

func (c *cli) serve(cmd *cobra.Command, _ []string) error {
	app, err := c.load(cmd)
	if err != nil {
		return err
	}
	if err := app.Run(cmd.Context()); err != nil {
		app.Logger().Error("service stopped with an error", "error", err.Error())
		return reported
	}
	return nil
}

func (c *cli) check(cmd *cobra.Command, _ []string) error {
	app, err := c.load(cmd)
	if err != nil {
		return err
	}
	names := make([]string, len(app.plugins))
	for i, p := range app.plugins {
		names[i] = p.Name()
	}
	mark := "ok"
	if c.useColor(cmd.OutOrStdout()) {
		mark = ansiGreen + "ok" + ansiReset
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s is valid (env %s; plugins: %s)\n", mark, app.configFileName(), app.cfg.Env, strings.Join(names, ", "))
	return nil
}

// configFileName names the configuration the App read, for messages.
func (a *App) configFileName() string {
	if a.configFile == "config" && a.opts.ConfigText != "" {
		return "the configuration"
	}
	if a.configFile == "" {
		return "the configuration"
	}
	if _, err := os.Stat(a.configFile); err != nil {
		return "the configuration (no file: defaults and the environment)"
	}
	return a.configFile
}

const (
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiBold  = "\x1b[1m"
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// useColor reports whether messages to w are coloured: --color always, or auto on a
// terminal when NO_COLOR is not set and TERM is not "dumb".
func (c *cli) useColor(w io.Writer) bool {
	switch c.color {
	case "always":
		return true
	case "never":
		return false
	}
	environ := c.opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	if lookupEnv(environ, "NO_COLOR") != "" || lookupEnv(environ, "TERM") == "dumb" {
		return false
	}
	return isTerminal(w)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// writeConfigErrors prints one line per problem — key, rule, fix — then a count.
func writeConfigErrors(w io.Writer, errs ConfigErrors, color bool) {
	for _, e := range errs {
		key, fix := e.Key, e.Fix
		if color {
			key = ansiBold + ansiRed + key + ansiReset
		}
		line := key + ": " + e.Problem
		if fix != "" {
			if color {
				line += ansiDim + "; fix: " + ansiReset + fix
			} else {
				line += "; fix: " + fix
			}
		}
		fmt.Fprintln(w, line)
	}
	summary := fmt.Sprintf("%d configuration errors", len(errs))
	if len(errs) == 1 {
		summary = "1 configuration error"
	}
	if color {
		summary = ansiRed + summary + ansiReset
	}
	fmt.Fprintln(w, summary)
}
