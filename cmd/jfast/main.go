package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/cmd/jfast/internal/scaffold"
	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/internal/roster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the jfast command line: the service commands (serve, check, config,
// worker, migrate, drill) over every built-in plugin, plus new and version.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The plugins are stand-ins: built without the service's own options, so a
	// rule that depends on them is left to the service's own check.
	root := cli.NewCommand(framework.Options{Plugins: plugins(), StandIn: true}, drills.Command)
	root.Use = "jfast [command]"
	root.Short = "The jfast command line: scaffold a service, check and explain its configuration"
	root.Long = `jfast writes new services (jfast new) and checks and explains a jfast.toml without
building the service (jfast check, jfast config): every built-in plugin is compiled in
(` + strings.Join(pluginNames(), ", ") + `).

"jfast serve" runs the enabled plugins with no routes of their own: /live, /ready
and /metrics only, and no queue workers (the binary has none of a service's job
handlers, so it would fail the service's jobs). "jfast worker" is refused: a worker
is the service's own binary ("go run . worker").`
	root.Example = `  jfast new orders --module github.com/acme/orders --plugins http,db
  jfast check --config jfast.toml
  jfast config --config jfast.toml`
	// A bare "jfast" shows the help; "jfast serve" is still there.
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	for _, c := range root.Commands() {
		if c.Name() == "serve" {
			c.Short = "Run the enabled plugins with /live, /ready and /metrics (no routes, no queue workers)"
		}
	}
	root.AddCommand(newCommand(), versionCommand())
	delegateCheck(root, args)
	refuseWorker(root)
	return cli.Run(ctx, root, args, stdout, stderr)
}

func plugins() []framework.Plugin {
	var ps []framework.Plugin
	for _, name := range pluginNames() {
		ps = append(ps, builtin[name]())
	}
	return ps
}

// pluginNames are the built-in plugins in the roster's order (observability, part
// of the framework, is always there and not listed).
func pluginNames() []string {
	var names []string
	for _, n := range roster.Names {
		if builtin[n] != nil {
			names = append(names, n)
		}
	}
	return names
}

func newCommand() *cobra.Command {
	var o scaffold.Options
	var pluginList string
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Write a new service that builds and passes its tests at once",
		Long: `Write a new jfast service in ./NAME (or --dir): go.mod, main.go, routes with one
example route per chosen plugin and their tests, jfast.toml with every key of the
chosen plugins present, commented, with its default, a README, a Makefile, a
.gitignore, a multi-stage non-root Dockerfile and a compose file for the chosen
dependencies. "go build ./... && go test ./..." passes in it straight away.

go.mod requires the framework with a replace to the jfast checkout this binary was
built from (or --framework PATH), and pins the framework's dependency versions.

NAME is lower-case letters, digits and single dashes, starting with a letter, and
not a Windows device name (con, aux, nul, com1, ...). Without --module it is the
module path too, so not one the go command keeps for itself: std, cmd, all, tool,
work, main, go, toolchain, or a standard library package's path (fmt, net). The
directory must not exist or be empty: jfast new never overwrites a file.

Plugins: ` + strings.Join(availableForNew(), ", ") + ` (observability is always there).`,
		Example: `  jfast new orders
  jfast new orders --module github.com/acme/orders --plugins http,db,cache
  jfast new billing-api --dir services/billing --framework ~/src/jfast`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &cli.ExitError{Code: 2, Err: fmt.Errorf("jfast new: want the service's NAME"), Usage: true}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if pluginList != "" {
				o.Plugins = strings.Split(pluginList, ",")
			}
			o.Available = builtin
			if o.Framework == "" {
				root, err := frameworkRoot()
				if err != nil {
					return &cli.ExitError{Code: 1, Err: err}
				}
				o.Framework = root
			} else {
				abs, err := filepath.Abs(o.Framework)
				if err != nil {
					return &cli.ExitError{Code: 1, Err: err}
				}
				o.Framework = abs
			}
			if err := scaffold.Check(o.Name, o.Module); err != nil {
				return &cli.ExitError{Code: 2, Err: err, Usage: true}
			}
			dir, err := scaffold.Write(o)
			if err != nil {
				return &cli.ExitError{Code: 1, Err: err}
			}
			if !filepath.IsAbs(dir) && !strings.HasPrefix(dir, ".") {
				// "./orders": a path, where "orders" alone reads as the name again.
				dir = "." + string(filepath.Separator) + dir
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote service %s in %s\n\n  cd %s\n  go test ./...\n  go run .\n", o.Name, dir, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Module, "module", "", "Go module path (default NAME)")
	cmd.Flags().StringVar(&pluginList, "plugins", "", "comma-separated plugins to add: "+strings.Join(availableForNew(), ","))
	cmd.Flags().StringVar(&o.Dir, "dir", "", "directory to write (default ./NAME); must not exist or be empty")
	cmd.Flags().StringVar(&o.Framework, "framework", "", "the jfast checkout go.mod's replace points at (default: the one this binary was built from)")
	return cmd
}

func availableForNew() []string {
	var names []string
	for _, n := range scaffold.Known() {
		if builtin[n] != nil {
			names = append(names, n)
		}
	}
	return names
}

// frameworkRoot finds the jfast checkout this binary was compiled from: the source
// path of this package, two directories up, when it still holds jfast's go.mod.
// (A binary built with -trimpath has no such path: pass --framework.)
func frameworkRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if err := scaffold.FrameworkModule(root); err == nil {
			return root, nil
		}
	}
	return "", fmt.Errorf("cannot find the jfast checkout this binary was built from; pass --framework PATH (the directory with jfast's go.mod)")
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print jfast's version, its commit and the built-in plugins",
		Example: "  jfast version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
}

func versionText() string {
	version, revision, modified := "(devel)", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "jfast %s", version)
	if revision != "" {
		if len(revision) > 12 {
			revision = revision[:12]
		}
		fmt.Fprintf(&b, " (commit %s", revision)
		if modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s/%s\nplugins: observability, %s", runtime.Version(), runtime.GOOS, runtime.GOARCH, strings.Join(pluginNames(), ", "))
	return b.String()
}
