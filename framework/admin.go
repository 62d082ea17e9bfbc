package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework/statuspage"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/readiness"
)

// The admin listener (app.admin_listen) serves what operators need and clients
// must not see: /metrics, the full /ready (details and meta name hosts, users
// and databases), and any route a plugin, the service or the framework marks
// as an admin route. Where they go:
//
//   - with app.admin_listen set, on that listener only, behind the framework's
//     own middleware (request ID, recovery, deadline, access log) and no
//     plugin middleware; the public listener keeps /live and a redacted /ready
//     (each plugin's status, no detail, no meta);
//   - without it, on the public listener beside the service's routes, as
//     before; /ready is redacted there in production, complete in development.
//
// Admin routes come from three places, mounted in this order:
//
//  1. the framework's own, in [App.mountAdmin] (the place to add an operator
//     page the framework serves);
//  2. every enabled plugin that is an [AdminRouteMounter] (the built-in
//     observability plugin's /metrics);
//  3. [Options.AdminRoutes], the service's own (pprof, a debug page).

// AdminRouteMounter is a plugin that serves routes for operators rather than
// clients (metrics, status pages): on app.admin_listen when it is set, else on
// the public listener beside the service's routes.
type AdminRouteMounter interface {
	Plugin
	MountAdminRoutes(r chi.Router)
}

// adminListening reports whether app.admin_listen is set.
func (a *App) adminListening() bool { return a.cfg.AdminListen != "" }

// readyHandler is /ready on the public listener: redacted when an admin
// listener serves the details, and in production, where anyone who can reach
// the service could read them.
func (a *App) readyHandler(ready *readiness.Aggregator) http.Handler {
	if a.adminListening() || a.cfg.Production() {
		return ready.RedactedHandler()
	}
	return ready.Handler()
}

// mountAdmin mounts every admin route on r, the admin listener's router or,
// without app.admin_listen, the public one: first the framework's own (an
// operator page the framework serves is mounted here, before the plugins'; one
// that must never be public mounts itself only when a.adminListening()), then
// the plugins' and the service's.
func (a *App) mountAdmin(r chi.Router) error {
	if a.adminListening() {
		r.Mount("/status", a.statusPage())
	}
	for _, p := range a.plugins {
		if m, ok := p.(AdminRouteMounter); ok {
			m.MountAdminRoutes(r)
		}
	}
	if a.opts.AdminRoutes != nil {
		if err := a.opts.AdminRoutes(a, r); err != nil {
			return fmt.Errorf("mount admin routes: %w", err)
		}
	}
	return nil
}

// statusPage is /status, the live status page (see docs/status.md): only on
// the admin listener, since it shows what the full /ready shows and more.
func (a *App) statusPage() http.Handler {
	a.status = statuspage.New(statuspage.Source{
		Service:     a.cfg.Name,
		Env:         a.cfg.Env,
		Ready:       func(ctx context.Context) readiness.Result { return a.ready.Load().Run(ctx) },
		Registry:    a.resil,
		Metrics:     a.registry,
		Config:      a.WriteEffectiveConfig,
		Mask:        MaskSecrets,
		DrillReport: a.cfg.DrillReport,
	})
	return a.status
}

// buildAdminRouter returns the admin listener's handler: /live, the full
// /ready and the admin routes, behind the framework's middleware.
func (a *App) buildAdminRouter() (http.Handler, error) {
	r := chi.NewRouter()
	setProblemHandlers(r)
	r.Method(http.MethodGet, "/live", readiness.LiveHandler())
	r.Method(http.MethodGet, "/ready", a.ready.Load().Handler())
	if err := a.mountAdmin(r); err != nil {
		return nil, err
	}
	return a.serveRequest(r), nil
}

// setProblemHandlers answers an unknown route and a wrong method with problems.
func setProblemHandlers(r *chi.Mux) {
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		// The path is the instance member already; echoing it in the detail
		// would reflect whatever a client put in it.
		problem.Write(w, req, problem.NotFound("no route matches this path"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		problem.Write(w, req, problem.MethodNotAllowed(allowedMethods(r, req.URL.Path)))
	})
}

// validateAdminListen checks app.admin_listen against app.listen.
func (c AppConfig) validateAdminListen(v *Validation) {
	if c.AdminListen == "" {
		return
	}
	if problem := listenProblem(c.AdminListen); problem != "" {
		v.Error("admin_listen", problem, `set admin_listen = "127.0.0.1:9000", or leave it unset to serve /metrics on the public listener`)
		return
	}
	_, port, _ := net.SplitHostPort(c.AdminListen)
	if c.AdminListen == c.Listen && port != "0" {
		v.Error("admin_listen", "must differ from app.listen", "give the admin listener a port of its own, one the public network cannot reach")
	}
}
