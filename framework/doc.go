// Package framework is the core of jfast: it reads jfast.toml and the environment,
// validates every plugin's table before anything starts, starts the plugins in
// dependency order, serves HTTP through chi with jfast's middleware, and renders
// every error as RFC 9457 problem+json.
//
// A service's main compiles its plugins in and mounts its routes; its command line
// (serve, check, config, worker, migrate) is package framework/cli:
//
//	func main() {
//		cli.Main(framework.Options{
//			Plugins: []framework.Plugin{http.New(), db.New()},
//			Routes: func(app *framework.App, r chi.Router) error {
//				billing, err := http.Client(app, "billing")
//				if err != nil {
//					return err // not configured: the boot fails, naming it
//				}
//				r.Method("GET", "/orders/{id}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//					resp, err := billing.Get(r.Context(), "/invoices/"+chi.URLParam(r, "id"))
//					if err != nil {
//						return err // a 503 problem naming billing
//					}
//					...
//				}))
//				return nil
//			},
//		})
//	}
//
// # Configuration
//
// The [app] table is [AppConfig]; [plugins] enabled chooses which compiled-in
// plugins run; each plugin has a [plugin.<name>] table. The environment overrides
// with JFAST_<SECTION>_<KEY>, "__" between deeper levels:
// JFAST_APP_LISTEN, JFAST_DB_URL, JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL.
// Deploy keys (addresses, DSNs, credentials) take the environment over the file;
// shape keys (timeouts, limits) take the file; a disagreement is a WARNING at boot.
// Every configuration problem is collected into [ConfigErrors] and reported at once.
//
// # Plugins
//
// A [Plugin] is a name plus optional capabilities found by type assertion:
// [Configurable], [Validator], [DeployKeyer], [Dependent], [Starter], [Stopper],
// [Checker], [RouteMounter], [Middlewarer]. A dependency that is down never fails
// the boot: plugins connect lazily and report in /ready.
//
// # Requests
//
// Middleware, outermost first: request ID, panic recovery, request deadline
// (app.request_timeout), access log, then the plugins' middleware (metrics). A
// [HandlerFunc] may return an error; [WriteError] renders it through package problem.
package framework
