package framework

import (
	"context"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/jfastframework/jfast/readiness"
)

// Plugin is the one thing every jfast plugin is: a name. Everything else a plugin
// can do is an optional capability, a one-method interface found by type assertion
// and guarded at compile time in the plugin's package:
//
//	var (
//		_ framework.Configurable = (*Plugin)(nil)
//		_ framework.Starter      = (*Plugin)(nil)
//		_ framework.Checker      = (*Plugin)(nil)
//	)
//
// The lifecycle, in order:
//
//  1. Config: the [plugin.<name>] table is decoded into the value Config returns
//     (pre-filled with defaults), unknown keys and wrong types are reported.
//  2. ResolveDefaults ([Resolver]): defaults that depend on other settings (a key
//     prefix from app.name) are filled in, once, where the table left them unset.
//  3. Validate: the plugin checks its decoded table, reading only; every error of
//     every plugin is collected and printed together, and a single one stops the
//     boot. Every table is decoded and resolved before any plugin validates, so
//     a rule may ask another plugin about its table ([Validation.RequirePlugin]
//     asks a [Provider]).
//  4. Start: plugins start in dependency order (declared dependencies, then the
//     order of [plugins] enabled), each bounded by app.start_timeout. A start must
//     not wait on its dependency: a dependency that is down never fails the boot.
//     A failed start stops the plugins already started, in reverse.
//  5. MountRoutes and Middleware: the plugin's own routes and request middleware.
//  6. Serve: a plugin that serves a protocol of its own (gRPC) starts serving,
//     after every route and service is registered, before the HTTP server
//     listens.
//  7. Check: the plugin's /ready report, run in parallel with the others.
//  8. Shutdown and Stop: the HTTP server and every Server drain together
//     (within app.shutdown_timeout), then the plugins stop in reverse start
//     order, each Stop with a context of its own bounded by
//     app.plugin_stop_timeout.
type Plugin interface {
	// Name is the plugin's key in [plugins] enabled and in [plugin.<name>].
	Name() string
}

// Configurable is a plugin with a [plugin.<name>] table.
type Configurable interface {
	Plugin
	// Config returns a pointer to the plugin's configuration struct, already holding
	// its defaults. Fields are bound by their `koanf:"key"` tags.
	Config() any
}

// Validator is a plugin that checks its decoded configuration. It reports every
// problem through v; it must not stop at the first.
type Validator interface {
	Plugin
	Validate(v *Validation)
}

// DeployKeyer is a plugin with deploy keys: addresses, DSNs, URLs and credentials
// that depend on where the service runs, so the environment wins over the file.
// Keys are relative to the plugin's table; a "*" segment matches any name, e.g.
// "upstreams.*.base_url".
type DeployKeyer interface {
	Plugin
	DeployKeys() []string
}

// Dependency names another plugin this one needs started first.
type Dependency struct {
	Name string
	// Optional dependencies order the start when both are enabled; a required one
	// that is not enabled is a boot error.
	Optional bool
}

// Dependent is a plugin that must start after others.
type Dependent interface {
	Plugin
	Dependencies() []Dependency
}

// Starter is a plugin with work to do at boot. Start is bounded by ctx; it receives
// the App to find the plugins it depends on.
type Starter interface {
	Plugin
	Start(ctx context.Context, app *App) error
}

// Stopper is a plugin that releases resources (pools, workers) at shutdown.
type Stopper interface {
	Plugin
	Stop(ctx context.Context) error
}

// Checker is a plugin that reports to /ready.
type Checker interface {
	Plugin
	Check(ctx context.Context) readiness.Report
}

// RouteMounter is a plugin that serves routes of its own to clients (signed
// URLs). Routes for operators are an [AdminRouteMounter]'s.
type RouteMounter interface {
	Plugin
	MountRoutes(r chi.Router)
}

// Middlewarer is a plugin that wraps every request, inside the framework's own
// middleware (request ID, recovery, deadline, access log).
type Middlewarer interface {
	Plugin
	Middleware() func(http.Handler) http.Handler
}

// WorkerRunner is a plugin that runs background workers, such as the queue
// plugin's job consumers. The service's "worker" command (package framework/cli)
// runs only these: it starts the enabled plugins as serve does, runs the service's
// Routes function into a router that is not served (so job handlers registered
// there exist), serves only /live, /ready, /metrics and the plugins' own routes on
// app.listen (so the orchestrator can probe the worker), and calls RunWorkers on
// every enabled WorkerRunner, concurrently.
//
// RunWorkers is called after every plugin has started. It processes work until ctx
// is done, then stops taking new work, lets the work in flight finish within the
// plugin's own bound, and returns nil. An error return ends the worker process (exit
// status 1) after the other runners and the plugins are stopped. Whether the same
// plugin also runs workers inside "serve" is the plugin's configuration to decide.
type WorkerRunner interface {
	Plugin
	RunWorkers(ctx context.Context) error
}

// Migrator is a plugin with schema migrations, such as the db plugin's embedded
// SQL migrations. The service's "migrate up|down|status" command (package
// framework/cli) calls it.
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

// Server is a plugin that serves a protocol of its own beside the HTTP server,
// such as gRPC. Serve runs once Options.Routes has run (so the services it
// registered are in place) and before the HTTP server listens: it starts
// serving in the background and returns once it accepts connections, or with
// the error that prevents it, which fails the boot. Shutdown runs when the App
// stops, at the same time as the HTTP server's drain and bounded by ctx
// (app.shutdown_timeout), before any plugin's Stop; it must return by the time
// ctx ends, having stopped serving.
type Server interface {
	Plugin
	Serve(app *App) error
	Shutdown(ctx context.Context) error
}

// ClientPlugin is the set of capabilities a plugin that calls remote services
// with credentials has in common: the http, grpc and llm clients, the mail
// sender, auth's key set, storage's disks. Its table is validated; the
// remote's address and credentials are deploy keys, and the credentials are
// secret keys too; it builds its clients at Start without waiting on the
// remote; and it reports the remote's state to /ready.
//
// It is a compile-time guard and nothing more: such a plugin writes one line
// for it, and one for each capability it has beyond it,
//
//	var (
//		_ framework.ClientPlugin = (*Plugin)(nil)
//		_ framework.Dependent    = (*Plugin)(nil)
//		_ framework.Stopper      = (*Plugin)(nil)
//	)
//
// while the framework still finds each one-method capability on its own, by
// type assertion, and asks for no composite. A plugin that lacks one of these
// capabilities guards the ones it has, one line each.
type ClientPlugin interface {
	Configurable
	Validator
	DeployKeyer
	SecretKeyer
	Starter
	Checker
}

// BackingServicePlugin is the set of capabilities a plugin that holds the
// connection to a backing service has in common: the cache's Redis client,
// the db plugin's PostgreSQL pool, the queue's broker, the telemetry plugin's
// exporter to its collector. Its table is validated; defaults that come from
// [app] (a key prefix, an application or service name) are resolved into it;
// the service's address is a deploy key; it makes its client at Start without
// waiting on the service, and releases it at Stop (the pool closed, the spans
// flushed, the running jobs drained).
//
// Like [ClientPlugin] it is a compile-time guard only: the plugin writes one
// line for it and one for each capability beyond it, and the framework finds
// every capability by type assertion.
type BackingServicePlugin interface {
	Configurable
	Validator
	Resolver
	DeployKeyer
	Starter
	Stopper
}

// LayeredPlugin is the set of capabilities a plugin that works through
// another plugin has in common: channels through the cache's Redis client,
// the gateway through the http plugin's upstreams, idempotency through the db
// or cache plugin's store. Its table is validated; it declares that plugin as
// a dependency and takes it from the App at Start; it stops its own work at
// Stop, before that plugin stops; and it reports to /ready what it sees of it
// (the store's answer, the upstreams' breakers).
//
// Like [ClientPlugin] it is a compile-time guard only.
type LayeredPlugin interface {
	Configurable
	Validator
	Dependent
	Starter
	Stopper
	Checker
}
