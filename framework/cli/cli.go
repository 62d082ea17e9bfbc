package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
)

// The command line is built with github.com/spf13/cobra: the Go ecosystem's usual
// library for commands with subcommands, generated --help with examples, and shell
// completion, so a jfast service's CLI behaves like the other Go tools its
// operators use.

// ExitError is an error with the exit status the command line ends with. Commands
// return it for usage mistakes (Code 2, see [UsageError]) and for failures already
// reported to the user (Code 1, Err nil or already printed).
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

// UsageError is a command-line mistake: exit status 2, with a hint to --help.
func UsageError(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...), Usage: true}
}

// reported is a failure whose message was already printed: exit status 1.
var reported = &ExitError{Code: 1}

// Command adds a subcommand to a service's command line. It receives the
// [Service], whose Load builds the App exactly as the built-in commands do.
type Command func(s *Service) *cobra.Command

// Service is what the commands of one service's command line share: the Options
// main compiled in and the persistent flags --config and --color.
type Service struct {
	opts   framework.Options
	name   string
	config string
	color  string
}

// Name is the name the command line shows in examples: the binary's base name.
func (s *Service) Name() string { return s.name }

// Options returns the Options main compiled in, with --config applied.
func (s *Service) Options() framework.Options {
	o := s.opts
	o.ConfigFile = s.config
	return o
}

// Main runs a service's command line (see [NewCommand]): by default it serves
// until SIGINT or SIGTERM, then shuts down gracefully. It exits the process: 0
// after a clean stop or a valid check, 1 for an invalid configuration or a failed
// start, 2 for a command-line mistake.
func Main(opts framework.Options, extra ...Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, NewCommand(opts, extra...), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// NewCommand returns a service's command line for opts, with these commands:
//
//	serve            run the service (the default when no command is given)
//	check            validate the configuration: 0 valid, 1 invalid, 2 usage
//	config           print the effective configuration as TOML, with the source of every value
//	worker           run only the plugins' workers (see [framework.WorkerRunner])
//	migrate up|down|status   run the plugins' migrations (see [framework.Migrator])
//
// and one more per extra [Command]. Every command takes --config PATH and --color
// auto|always|never, and has --help with an example. Output goes to the command's
// OutOrStdout and ErrOrStderr; run it with [Run] to get the exit status. Tools
// add their own subcommands to the returned command (the jfast binary adds new
// and version).
func NewCommand(opts framework.Options, extra ...Command) *cobra.Command {
	name := filepath.Base(os.Args[0])
	if name == "" || name == "." {
		name = "service"
	}
	s := &Service{opts: opts, name: name}
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
		RunE:          s.serve,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&s.config, "config", opts.ConfigFile, "configuration file (default $JFAST_CONFIG, else ./jfast.toml if present)")
	root.PersistentFlags().StringVar(&s.color, "color", "auto", "colour in messages: auto (only on a terminal, unless NO_COLOR is set), always or never")
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
			Args:    NoArgs,
			RunE:    s.serve,
		},
		&cobra.Command{
			Use:   "check",
			Short: "Validate the configuration and exit",
			Long: `Validate the configuration exactly as the service's boot does, without starting
anything or connecting to any dependency. Every problem is printed, one line each
with its key, the rule and the fix, then a count.

Exit status: 0 valid, 1 invalid, 2 command-line mistake.`,
			Example: fmt.Sprintf("  %[1]s check\n  %[1]s check --config deploy/production.toml", name),
			Args:    NoArgs,
			RunE:    s.check,
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
			Args:    NoArgs,
			RunE:    s.printConfig,
		},
		s.workerCommand(),
		s.migrateCommand(),
	)
	for _, c := range extra {
		root.AddCommand(c(s))
	}
	return root
}

// NoArgs refuses positional arguments as a usage mistake (exit status 2).
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageError("%s: unexpected argument %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// Run executes root with args and returns the exit status: 0 on success, 1 when
// the command failed (its message already printed), 2 for a command-line mistake
// (unknown command or flag, wrong arguments), with a hint to --help.
func Run(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
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
		if f := root.PersistentFlags().Lookup("color"); f != nil && useColor(f.Value.String(), nil, stderr) {
			prefix = ansiRed + "error:" + ansiReset + " "
		}
		fmt.Fprintln(stderr, prefix+framework.MaskSecrets(exit.Err.Error()))
	}
	if exit.Usage {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exit.Code
}

// Load builds the App for one run of cmd (framework.New with --config applied and
// the command's error stream as the log output unless main chose one). An invalid
// configuration is printed in the human form, one line per problem, and returned
// as an [ExitError] with status 1.
func (s *Service) Load(cmd *cobra.Command) (*framework.App, error) {
	switch s.color {
	case "auto", "always", "never":
	default:
		return nil, UsageError("--color must be auto, always or never, got %q", s.color)
	}
	o := s.Options()
	if o.LogOutput == nil {
		o.LogOutput = cmd.ErrOrStderr()
	}
	app, err := framework.New(o)
	if err != nil {
		var errs framework.ConfigErrors
		if errors.As(err, &errs) {
			writeConfigErrors(cmd.ErrOrStderr(), errs, s.useColor(cmd.ErrOrStderr()))
			return nil, reported
		}
		return nil, &ExitError{Code: 1, Err: err}
	}
	return app, nil
}

func (s *Service) serve(cmd *cobra.Command, _ []string) error {
	app, err := s.Load(cmd)
	if err != nil {
		return err
	}
	if err := app.Run(cmd.Context()); err != nil {
		app.Logger().Error("service stopped with an error", "error", err.Error())
		return reported
	}
	return nil
}

func (s *Service) check(cmd *cobra.Command, _ []string) error {
	app, err := s.Load(cmd)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	mark := "ok"
	if s.useColor(out) {
		mark = ansiGreen + "ok" + ansiReset
	}
	// Rules that depend on what the service's main compiled in cannot be
	// decided by a binary carrying stand-in plugins (the jfast binary): they
	// are named, never reported as errors.
	undecided := app.Undecided()
	bin, named := serviceBinary(app)
	own := "`" + bin + " check`"
	if !named {
		own = "the service's own " + own
	}
	for _, e := range undecided {
		fmt.Fprintf(out, "%s: cannot know here: run %s (whether it holds depends on what the service's main compiled in)\n", e.Key, own)
	}
	fmt.Fprintf(out, "%s: %s is valid (env %s; plugins: %s)", mark, app.ConfigName(), app.Config().Env, strings.Join(pluginNames(app.Plugins()), ", "))
	switch len(undecided) {
	case 0:
		fmt.Fprintln(out)
	case 1:
		fmt.Fprintf(out, " but for 1 rule only %s can decide\n", own)
	default:
		fmt.Fprintf(out, " but for %d rules only %s can decide\n", len(undecided), own)
	}
	return nil
}

// serviceBinary is how the jfast binary names the service's own binary:
// app.name, which names the service (and, by convention, its binary), or
// "<binary>" when neither the file nor the environment sets it (named
// false): its default, "jfast", would name the jfast binary itself.
func serviceBinary(app *framework.App) (name string, named bool) {
	if _, named := app.Sources()["app.name"]; named {
		return app.Config().Name, true
	}
	return "<binary>", false
}

func (s *Service) printConfig(cmd *cobra.Command, _ []string) error {
	app, err := s.Load(cmd)
	if err != nil {
		return err
	}
	return app.WriteEffectiveConfig(cmd.OutOrStdout())
}

// loadPluginsThat loads the App and returns it with its enabled plugins that
// are a T. When none is, it writes "<none> (enabled: <plugins>); <fix>" to
// stderr and returns the error that says it was reported.
func loadPluginsThat[T framework.Plugin](s *Service, cmd *cobra.Command, none, fix string) (*framework.App, []T, error) {
	app, err := s.Load(cmd)
	if err != nil {
		return nil, nil, err
	}
	var ts []T
	for _, p := range app.Plugins() {
		if t, ok := p.(T); ok {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s (enabled: %s); %s\n", none, strings.Join(pluginNames(app.Plugins()), ", "), fix)
		return nil, nil, reported
	}
	return app, ts, nil
}

func pluginNames[P framework.Plugin](ps []P) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name()
	}
	return names
}
