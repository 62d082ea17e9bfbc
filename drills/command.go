package drills

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
)

// Command is the service's "drill" command, a [cli.Command]: a service's main
// that wants it passes it to cli.Main, and only that service's binary carries the
// drills:
//
//	cli.Main(opts, drills.Command)
func Command(s *cli.Service) *cobra.Command {
	f := &drillFlags{}
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Take each dependency away from the running service and check it degrades and recovers",
		Long: `Drive a service that is already running: for each enabled plugin whose
dependency runs in a container named by JFAST_DRILL_<DEP>_CONTAINER (PG, REDIS,
S3, SMTP, ...), docker pause it, check that --route answers its documented status
within --deadline, that /ready names the dependency and that --other keeps
answering, then unpause it and wait for the route to answer 200 again. A plugin
whose container is not named is skipped with a SKIP line naming the variable. A
plugin whose configuration reaches no dependency (auth in hmac mode, mail with the
log transport, storage with only local disks) has no drill. Progress is printed as
it goes, then the table (--report writes it as Markdown).

Exit status: 0 at least one drill ran and every drill passed, 1 one failed or none
ran, 2 command-line mistake.`,
		Example: fmt.Sprintf("  JFAST_DRILL_PG_CONTAINER=shop-db %[1]s drill --route /orders/1\n"+
			"  %[1]s drill --only cache --route /products --want cache=200", s.Name()),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCommand(s, cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "the running service's base URL (default: http:// + app.listen)")
	fl.StringArrayVar(&f.routes, "route", nil, "a GET path that uses the dependencies (a query string may follow), or plugin=/path for one plugin (repeatable)")
	fl.StringVar(&f.other, "other", "", "a GET path that uses none of them")
	fl.StringSliceVar(&f.only, "only", nil, "drill only these plugins (db,cache)")
	fl.StringArrayVar(&f.headers, "header", nil, `a request header for the route, "Name: value" (repeatable)`)
	fl.StringArrayVar(&f.want, "want", nil, "plugin=status: the route's status while the dependency is away (default 503)")
	fl.DurationVar(&f.deadline, "deadline", 35*time.Second, "the longest one request may take while a dependency is away")
	fl.StringVar(&f.report, "report", "", "write the table as Markdown to this file")
	return cmd
}

// drillFlags are the drill command's flags.
type drillFlags struct {
	url, other, report string
	routes, headers    []string
	only, want         []string
	deadline           time.Duration
}

// drilledPlugins returns the enabled plugins to drill, and those of them
// declared critical ([plugin.X] critical = true: their outage makes /ready
// 503, not a degraded 200). The plugins are the App's own, configured by
// Load: each says whether its configuration has a dependency to take away,
// and one that has none is named on out and left out.
func drilledPlugins(app *framework.App, plugins []framework.Plugin, out io.Writer) (drilled, critical []string) {
	for _, p := range plugins {
		if !app.Enabled(p.Name()) {
			continue
		}
		if u, ok := p.(DependencyUser); ok && !u.UsesDependency() {
			fmt.Fprintf(out, "no drill for %s: its configuration uses no dependency that can be taken away\n", p.Name())
			continue
		}
		drilled = append(drilled, p.Name())
		if app.Critical(p.Name()) {
			critical = append(critical, p.Name())
		}
	}
	return drilled, critical
}

// routeFlag reads one --route: plugin=/path is the route of that plugin's
// drill; anything else is the route of the drills given none (plugin ""). A
// value starting with / is a path whole, so the = of its query string
// (/orders?status=paid) is not read as plugin=path.
func routeFlag(r string) (plugin, path string) {
	if !strings.HasPrefix(r, "/") {
		if plugin, path, ok := strings.Cut(r, "="); ok {
			return plugin, path
		}
	}
	return "", r
}

func runCommand(s *cli.Service, cmd *cobra.Command, f *drillFlags) error {
	app, err := s.Load(cmd)
	if err != nil {
		return err
	}
	o := ServiceOptions{BaseURL: f.url, Only: f.only, Other: f.other, Deadline: f.deadline,
		Routes: map[string]string{}, Want: map[string]int{}}
	if o.BaseURL == "" {
		host, port, err := net.SplitHostPort(app.Config().Listen)
		if err != nil {
			return cli.UsageError("drill: app.listen %q: %v; pass --url", app.Config().Listen, err)
		}
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		o.BaseURL = "http://" + net.JoinHostPort(host, port)
	}
	for _, r := range f.routes {
		if plugin, path := routeFlag(r); plugin != "" {
			o.Routes[plugin] = path
		} else {
			o.Route = path
		}
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return cli.UsageError("drill: --header %q: want \"Name: value\"", h)
		}
		o.Headers = append(o.Headers, strings.TrimSpace(name), strings.TrimSpace(value))
	}
	for _, w := range f.want {
		plugin, status, ok := strings.Cut(w, "=")
		n, err := strconv.Atoi(status)
		if !ok || err != nil {
			return cli.UsageError("drill: --want %q: want plugin=status, such as cache=200", w)
		}
		o.Want[plugin] = n
	}
	// After the flags: a usage mistake is the one line it prints.
	o.Plugins, o.Critical = drilledPlugins(app, s.Options().Plugins, cmd.OutOrStdout())
	results, err := RunService(cmd.Context(), o, cmd.OutOrStdout())
	if f.report != "" && len(results) > 0 {
		if werr := os.WriteFile(f.report, []byte(Markdown(results)), 0o644); werr != nil {
			return &cli.ExitError{Code: 1, Err: werr}
		}
	}
	if err != nil {
		return &cli.ExitError{Code: 1, Err: err}
	}
	return nil
}
