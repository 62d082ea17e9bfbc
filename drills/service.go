package drills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

// ContainerDeps maps a plugin name to the <DEP> of the variables that name the
// container holding its dependency: JFAST_DRILL_<DEP>_CONTAINER. A plugin not
// listed uses its own name in capitals.
var ContainerDeps = map[string]string{
	"db":      "PG",
	"cache":   "REDIS",
	"storage": "S3",
	"mail":    "SMTP",
	"auth":    "JWKS",
	"http":    "UPSTREAM",
}

// DependencyUser is a plugin whose configuration decides whether it has a
// dependency to take away at all: auth in hmac or public_key mode verifies
// tokens with no issuer to reach, mail with the log transport reaches no SMTP
// server, storage with only local disks reaches no S3. The drill command runs
// no drill for such a plugin, so the table holds only faults the service can
// meet. Plugins implement it without importing this package.
type DependencyUser interface {
	UsesDependency() bool
}

// ServiceOptions describe a drill of a service that is already running: what
// `jfast drill --config jfast.toml [--only db,cache]` passes.
type ServiceOptions struct {
	// BaseURL is the running service, "http://127.0.0.1:8000". Required.
	BaseURL string
	// Plugins are the enabled plugins of the service's config ([plugins]
	// enabled); each is drilled in turn when its container is named.
	Plugins []string
	// Only keeps these plugins (--only db,cache). Empty keeps all.
	Only []string
	// Route is a GET path that uses the dependencies. Routes overrides it per
	// plugin. One of them is required for each plugin drilled.
	Route  string
	Routes map[string]string
	// Headers are name, value pairs sent with the route (Authorization).
	Headers []string
	// Other is a GET path that uses none of them; empty skips that check.
	Other string
	// Want is the route's documented status per plugin while its dependency
	// is away. Defaults to 503; 200 for a route that fails open.
	Want map[string]int
	// Critical lists the plugins declared critical ([plugin.X] critical).
	Critical []string
	// Deadline bounds one request while a dependency is away. Defaults to
	// 35s: the default app.request_timeout (30 s) plus a margin.
	Deadline time.Duration
	// RecoverWithin bounds the recovery after the container is unpaused.
	// Defaults to 60s (the longest default breaker cool-down is 30 s).
	RecoverWithin time.Duration
	// DockerHost is the engine of the containers; empty uses the docker
	// client's default (DOCKER_HOST or the standard socket).
	DockerHost string
}

// RunService drills a running service: for each enabled plugin whose container
// the user named in JFAST_DRILL_<DEP>_CONTAINER, it pauses the container with
// docker pause, checks the route, /ready and the other route, unpauses it and
// waits for the recovery, printing progress and the table to out. A plugin
// without a container is skipped with a SKIP line naming the variable. The
// error reports the drills that failed.
func RunService(ctx context.Context, o ServiceOptions, out io.Writer) ([]Result, error) {
	if o.BaseURL == "" {
		return nil, errors.New("drill: the service's base URL is required")
	}
	if o.Deadline <= 0 {
		o.Deadline = 35 * time.Second
	}
	var results []Result
	var failed []string
	for _, plugin := range o.Plugins {
		if plugin == "observability" || plugin == "telemetry" || plugin == "idempotency" {
			continue // no dependency of their own
		}
		if len(o.Only) > 0 && !slices.Contains(o.Only, plugin) {
			continue
		}
		dep := ContainerDeps[plugin]
		if dep == "" {
			dep = strings.ToUpper(plugin)
		}
		name := os.Getenv(ContainerVar(dep))
		if name == "" {
			r := Result{Dependency: plugin, Fault: "docker pause", Skipped: ContainerVar(dep) + " is not set"}
			fmt.Fprintf(out, "SKIP %s: %s names no container\n", plugin, ContainerVar(dep))
			results = append(results, r)
			continue
		}
		route := o.Routes[plugin]
		if route == "" {
			route = o.Route
		}
		if route == "" {
			return results, fmt.Errorf("drill: no route to drill %s: name one that uses it", plugin)
		}
		want := o.Want[plugin]
		if want == 0 {
			want = http.StatusServiceUnavailable
		}
		c := &Container{Name: name, Host: o.DockerHost}
		fmt.Fprintf(out, "drilling %s: docker pause %s, GET %s\n", plugin, name, route)
		d := &Drill{
			Dependency: plugin, Fault: "docker pause " + name, BaseURL: o.BaseURL,
			Route: route, Headers: o.Headers, Other: o.Other, Want: want, Check: plugin,
			Critical: slices.Contains(o.Critical, plugin), Deadline: o.Deadline,
			RecoverWithin: o.RecoverWithin, Take: c.Pause, Give: c.Resume, Progress: out,
		}
		r := d.Run(ctx)
		results = append(results, r)
		if r.Err != nil {
			failed = append(failed, plugin+": "+r.Err.Error())
		}
	}
	fmt.Fprintf(out, "\n%s", Text(results))
	if len(failed) > 0 {
		return results, fmt.Errorf("drill: %d failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	ran := 0
	for _, r := range results {
		if r.Skipped == "" {
			ran++
		}
	}
	if ran == 0 {
		// A run that proved nothing must not look like one that passed.
		return results, errors.New("drill: no drill ran: name the containers of the dependencies with JFAST_DRILL_<DEP>_CONTAINER (see the SKIP lines)")
	}
	return results, nil
}
