package framework

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main is a service's main function: it runs the service's command line (see
// [NewCommand]), by default serving until SIGINT or SIGTERM, then shutting down
// gracefully. It exits the process: 0 after a clean stop or a valid check, 1 for an
// invalid configuration or a failed start, 2 for a command-line mistake.
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

// Command runs one command of a service's command line and returns the exit status:
// serve (the default), check, config, worker, migrate and drill. See [NewCommand].
func Command(ctx context.Context, opts Options, args []string, stdout, stderr io.Writer) int {
	return RunCommand(ctx, NewCommand(opts), args, stdout, stderr)
}
