package framework

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// BaseURLProblem returns what is wrong with s as the base URL of an outbound
// client (an http upstream, a model provider), or "": it must be an
// absolute http or https URL with a host, a port (when it names one) from
// 1 to 65535, no credentials and no query or fragment. credentials says where credentials go instead ("an
// Authorization header in headers"). The message never repeats the URL: it
// may carry credentials.
func BaseURLProblem(s, credentials string) string {
	if s == "" {
		return "is missing"
	}
	u, err := url.Parse(s)
	switch {
	case !strings.Contains(s, "://") && !strings.HasPrefix(s, "/"):
		// "10.0.0.7:8000" or "billing:8000": an address, not a URL (as a
		// URL, "billing" would be its scheme). The value is not repeated:
		// it may carry credentials.
		return "has no scheme: write it with http:// (or https://) in front"
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an absolute http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case strings.HasSuffix(u.Host, ":"):
		return "has a colon and no port after it: write a port from 1 to 65535, or remove the colon"
	case PortProblem(u.Port()) != "":
		return PortProblem(u.Port())
	case u.User != nil:
		return "must not carry credentials: set " + credentials + " instead"
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		return "must not have a query or a fragment"
	}
	return ""
}

// PortProblem returns what is wrong with port, the port of an address a
// client dials, or "": a number must be from 1 to 65535, the TCP ports (0
// is a listener's "any port", and nothing answers a call to it; a larger
// number fails every dial with "invalid port"). A name ("https") is left to
// the resolver, and "" to the caller (a URL's scheme has a default port).
func PortProblem(port string) string {
	if port == "" || strings.Trim(port, "0123456789") != "" {
		return ""
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "has port " + port + ", which is not a TCP port: a port is from 1 to 65535"
	}
	return ""
}

// ClientConfigError returns the error of a client made in code (NewClient)
// whose settings have problems, or nil when errs is empty: what names the
// client ("http: upstream 'billing'"), then every key with its problem.
func ClientConfigError(what string, errs []ConfigError) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Key + ": " + e.Problem
	}
	return fmt.Errorf("%s: %s", what, strings.Join(msgs, "; "))
}
