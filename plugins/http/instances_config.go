package http

import (
	"cmp"
	"fmt"
	"net/url"
	"strings"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
)

// instanceProblems reports the problems of the instance keys.
func (u *Upstream) instanceProblems(l *framework.Problems) {
	if len(u.Instances) > 0 && u.Discover {
		l.Error("discover", "cannot be set together with instances",
			"keep instances (a fixed list of origins) or discover = true (base_url's host resolved again and again), not both")
	}
	seen := map[string]int{} // an origin, as instanceOrigin writes it → the first instances[i] listing it
	for n, raw := range u.Instances {
		key := fmt.Sprintf("instances[%d]", n)
		problem := checkBaseURL(raw)
		if problem == "" {
			v, _ := url.Parse(raw)
			origin := instanceOrigin(v)
			first, listed := seen[origin]
			switch {
			case v.Path != "" && v.Path != "/":
				problem = "must be an origin (scheme, host and port) without a path: the path comes from base_url"
			case listed:
				problem = fmt.Sprintf("is the origin of instances[%d] again, %s (a host name ignores case, and a missing port is the scheme's): each instance is listed once", first, origin)
			default:
				seen[origin] = n
			}
		}
		if problem != "" {
			l.Error(key, problem, `list origins such as "http://10.0.0.7:8010", in the file or comma-separated in JFAST_HTTP_UPSTREAMS__<NAME>__INSTANCES`)
		}
	}
	if (len(u.Instances) > 0 || u.Discover) && u.BreakerKey == KeyRoute {
		l.Error("breaker_key", `"route" cannot be used with instances or discover: each instance has a breaker of its own`,
			`remove breaker_key (the default, "origin"), or the instances`)
	}
	l.Deadline("resolve_every", u.ResolveEvery)
	switch {
	case u.HealthPath == "":
	case !strings.HasPrefix(u.HealthPath, "/"):
		l.Error("health_path", "must be a path starting with /", `set a path such as "/ready"`)
	case len(u.Instances) == 0 && !u.Discover:
		l.Error("health_path", "needs instances or discover = true: it checks the instances listed or discovered, and base_url alone is neither",
			"list the instances (one will do), set discover = true, or remove health_path")
	}
	l.Deadline("health_every", u.HealthEvery)
	l.Deadline("health_timeout", u.HealthTimeout)
}

// instanceOrigin returns the origin of an instance as two listings of one
// server compare: the scheme in lower case, the host and port as
// egress.HostPort writes them, the scheme's port when none is written
// ("http://Billing" and "http://billing:80" are one).
func instanceOrigin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	return scheme + "://" + egress.HostPort(u.Hostname(), cmp.Or(u.Port(), defaultPort(scheme)))
}

// instanceKeyProblems refuses the instance keys on a shared client, whose
// calls name their host in their URL.
func (s *SharedConfig) instanceKeyProblems(l *framework.Problems) {
	fix := "remove it; an [plugin.http.upstreams.<name>] table calls the instances of one service"
	if len(s.Instances) > 0 {
		l.Error("instances", "is not a shared client's: its calls take absolute URLs", fix)
	}
	if s.Discover {
		l.Error("discover", "is not a shared client's: its calls take absolute URLs", fix)
	}
	if s.ResolveEvery != DefaultResolveEvery {
		l.Error("resolve_every", "is not a shared client's: it discovers no instances", fix)
	}
	if s.HealthPath != "" || s.HealthEvery != DefaultHealthEvery || s.HealthTimeout != DefaultHealthTimeout {
		l.Error("health_path", "is not a shared client's, nor are health_every and health_timeout: it has no instances to check", fix)
	}
}
