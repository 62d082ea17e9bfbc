package framework

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main is a service's main function: it reads the command line, builds the App and
// serves until SIGINT or SIGTERM, then shuts down gracefully. It exits the process:
// 0 after a clean stop, 1 for an invalid configuration or a failed start, 2 for a
// command-line mistake.
//
//	func main() {
//		framework.Main(framework.Options{
//			Plugins: []framework.Plugin{http.New()},
//			Routes:  routes,
//		})
//	}
func Main(opts Options) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Command(ctx, opts, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Command runs one command of a service's command line and returns the exit status.
// Commands: "serve" (the default) and "check" (validate the configuration and exit).
func Command(ctx context.Context, opts Options, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", opts.ConfigFile, "configuration file (default $JFAST_CONFIG, else ./jfast.toml if present)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [serve|check] [--config jfast.toml]\n\n", os.Args[0])
		fmt.Fprintln(stderr, "  serve   run the service (default)")
		fmt.Fprintln(stderr, "  check   validate the configuration, print every problem, and exit")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	opts.ConfigFile = *config
	if opts.LogOutput == nil {
		opts.LogOutput = stderr
	}
	switch cmd {
	case "check":
		if _, err := New(opts); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintln(stdout, "configuration is valid")
		return 0
	case "serve":
		app, err := New(opts)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if err := app.Run(ctx); err != nil {
			app.Logger().Error("service stopped with an error", "error", err.Error())
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n", cmd)
		fs.Usage()
		return 2
	}
}
