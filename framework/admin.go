package framework

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

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
		return a.notWhileDraining(ready.RedactedHandler())
	}
	return a.notWhileDraining(ready.Handler())
}

// notWhileDraining answers /ready 503 once the App has begun to stop: during
// app.drain_delay the routes still answer, and whoever chooses instances by
// their /ready (a gateway's health check, a load balancer, a Kubernetes
// readiness probe) stops sending new work before the listener closes.
func (a *App) notWhileDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-a.draining:
			// Not to be kept by a cache, as no /ready answer is.
			w.Header().Set("Cache-Control", "no-store")
			p := problem.New(http.StatusServiceUnavailable, "shutting down: this instance takes no new work")
			p.Extensions = map[string]any{"verdict": "unavailable"}
			problem.Write(w, r, p)
		default:
			h.ServeHTTP(w, r)
		}
	})
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
		// A poll must outlast the /ready checks it runs, or a slow check
		// would read as a lost service.
		PollTimeout: max(statuspage.DefaultPollTimeout, a.cfg.ReadinessTimeout+time.Second),
		FrontDoor:   a.frontDoorReading(),
	})
	return a.status
}

// buildAdminRouter returns the admin listener's handler: /live, the full
// /ready and the admin routes, behind the framework's middleware.
func (a *App) buildAdminRouter() (http.Handler, error) {
	var err error
	r := chi.NewRouter()
	setProblemHandlers(r)
	r.Use(adminHostCheck(a.cfg.AdminHosts))
	r.Method(http.MethodGet, "/live", readiness.LiveHandler())
	r.Group(func(r chi.Router) {
		if a.cfg.AdminToken != "" {
			r.Use(adminAuth(a.cfg.AdminToken))
		}
		r.Method(http.MethodGet, "/ready", a.notWhileDraining(a.ready.Load().Handler()))
		err = a.mountAdmin(r)
	})
	if err != nil {
		return nil, err
	}
	return a.serveRequest(r), nil
}

// adminAuth lets a request through when it carries token: as a bearer token
// (scrapers, curl), or as the password of Basic auth (a browser asks for it
// once, for the status page). Anything else gets 401 with both challenges.
func adminAuth(token string) func(http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				_, got, ok = r.BasicAuth()
			}
			sum := sha256.Sum256([]byte(got))
			if ok && subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Add("WWW-Authenticate", `Bearer realm="jfast admin"`)
			w.Header().Add("WWW-Authenticate", `Basic realm="jfast admin", charset="UTF-8"`)
			problem.Write(w, r, problem.New(http.StatusUnauthorized, "the admin listener needs app.admin_token: Authorization: Bearer <token>"))
		})
	}
}

// adminHostCheck answers 421 to a request whose Host is a name neither
// localhost nor listed in hosts (app.admin_hosts). An IP literal always
// passes: a browser sends the name it resolved, so a name of another site
// rebound to 127.0.0.1 is refused, while probes and scrapers that address
// the listener by IP are not.
func adminHostCheck(hosts []string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if adminHostAllowed(r.Host, hosts) {
				next.ServeHTTP(w, r)
				return
			}
			problem.Write(w, r, problem.New(http.StatusMisdirectedRequest,
				"the admin listener answers to IP addresses, localhost and the names in app.admin_hosts"))
		})
	}
}

// adminHostAllowed reports whether a request's Host (with or without a port)
// is one the admin listener answers to.
func adminHostAllowed(host string, hosts []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	return slices.ContainsFunc(hosts, func(h string) bool { return strings.EqualFold(h, host) })
}

// warnAdminExposure logs a warning when the admin listener listens beyond the
// host (every interface, or an address other than loopback): what it serves
// names hosts, users and databases, and its routes may do more.
func (a *App) warnAdminExposure(addr string) {
	host, _, _ := net.SplitHostPort(addr)
	if loopbackHost(host) {
		return
	}
	guard := "nothing guards it: set app.admin_token (JFAST_APP_ADMIN_TOKEN) to require a bearer token"
	if a.cfg.AdminToken != "" {
		guard = "app.admin_token guards it"
	}
	a.log.Warn("the admin listener is reachable beyond this host: /metrics, the full /ready, /status and the admin routes answer whoever reaches "+addr+"; "+guard+
		", or set admin_listen = \"127.0.0.1:<port>\" and reach it through the host",
		slog.String("admin_listen", addr), slog.Bool("admin_token", a.cfg.AdminToken != ""))
}

// loopbackHost reports whether a listen address's host is loopback only.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// setProblemHandlers answers an unknown route and a wrong method with
// problems. chi hands them on to every sub-router mounted afterwards
// (r.Route, r.Mount of a chi router), so they also mark every request no
// route matched for RouteTemplate.
func setProblemHandlers(r *chi.Mux) {
	r.NotFound(func(w http.ResponseWriter, req *http.Request) {
		markUnrouted(w)
		// The path is the instance member already; echoing it in the detail
		// would reflect whatever a client put in it.
		problem.Write(w, req, problem.NotFound("no route matches this path"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		markUnrouted(w)
		problem.Write(w, req, problem.MethodNotAllowed(allowedMethods(r, req.URL.Path)))
	})
}

// minAdminToken is the shortest admin_token production takes: 32 bytes, as
// for every secret jfast checks.
const minAdminToken = 32

// validatePublicAdmin refuses, in production, admin routes on the public
// listener unless app.public_admin_routes says it is on purpose.
func (a *App) validatePublicAdmin(errs *ConfigErrors, enabled map[string]bool) {
	c := a.cfg
	if !c.Production() || c.AdminListen != "" || c.PublicAdminRoutes {
		return
	}
	var routes []string
	for name := range enabled {
		if _, ok := a.compiled[name].(AdminRouteMounter); ok {
			routes = append(routes, name)
		}
	}
	if a.opts.AdminRoutes != nil {
		routes = append(routes, "the service's AdminRoutes")
	}
	if len(routes) == 0 {
		return
	}
	slices.Sort(routes)
	*errs = append(*errs, ConfigError{Key: "app.admin_listen",
		Problem: fmt.Sprintf("is not set in production, so the admin routes (of %s: /metrics and the like) would be served on the public listener", strings.Join(routes, ", ")),
		Fix:     `set admin_listen = "127.0.0.1:9000" (a listener the public network cannot reach), or public_admin_routes = true to serve them publicly on purpose`})
}

// validateAdminListen checks app.admin_listen against app.listen,
// app.admin_token and app.admin_hosts.
func (c AppConfig) validateAdminListen(v *Validation) {
	if c.AdminToken != "" {
		switch {
		case c.AdminListen == "":
			v.Error("admin_token", "guards the admin listener, and app.admin_listen is not set",
				`set admin_listen = "127.0.0.1:9000" as well, or remove admin_token`)
		case c.Production() && len(c.AdminToken) < minAdminToken:
			v.Error("admin_token", fmt.Sprintf("must be at least %d bytes in production", minAdminToken),
				"set JFAST_APP_ADMIN_TOKEN to a random value, such as the output of `openssl rand -hex 32`")
		}
	}
	for i, h := range c.AdminHosts {
		if h == "" || strings.ContainsAny(h, ":/[] ") {
			v.Error(fmt.Sprintf("admin_hosts[%d]", i), fmt.Sprintf("%q is not a host name", h),
				`list names without scheme or port, such as admin_hosts = ["orders-admin.internal"] (IP addresses and localhost always pass)`)
		}
	}
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
