// Package cli is a jfast service's command line: what a service's main calls. It
// is kept apart from package framework so the App core carries no command-line
// library, and so commands a service does not ask for (the failure drills) are
// not linked into its binary.
//
// A service's main:
//
//	func main() {
//		cli.Main(framework.Options{
//			Plugins: []framework.Plugin{http.New(), db.New()},
//			Routes:  routes,
//		})
//	}
//
// The commands are serve (the default), check, config, worker and migrate. A
// [Command] adds one more; the failure drills come this way, from package
// drills, only into the services that import it:
//
//	cli.Main(opts, drills.Command)
//
// Exit status: 0 success, 1 a failure already reported (an invalid configuration,
// a failed start), 2 a command-line mistake. [Run] returns it; [Main] exits with
// it. See docs/cli.md.
package cli
