package framework_test

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// A base URL every call would fail on is refused when it is read: a port
// outside 1 to 65535 (Go's dialer answers "invalid port" to each call)
// among the rest.
func TestBaseURLProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, problem string }{
		{"http://billing:8010/v1", ""},
		{"http://billing", ""},
		{"https://[::1]:443", ""},
		{"http://billing:65535", ""},
		{"http://billing:1", ""},
		{"http://billing:99999", "has port 99999, which is not a TCP port: a port is from 1 to 65535"},
		{"http://billing:65536", "has port 65536"},
		{"http://billing:0", "has port 0"},
		{"http://[::1]:0/v1", "has port 0"},
		{"http://billing:123456789012345678901234567890", "which is not a TCP port"},
		{"http://billing:abc", "is not a valid URL"},
		{"", "is missing"},
		{"billing:8010", "has no scheme: write it with http:// (or https://) in front"},
		{"/v1", "must be an absolute http or https URL"},
		{"u:secret@billing:8010", "has no scheme"}, // without the value: it may hold a secret
		{"http://u:secret@billing:0", "has port 0"},
		{"http://billing:/v1", "has a colon and no port after it"},
		{"http://[::1]:/v1", "has a colon and no port after it"},
		{"http://billing/v1?", "must not have a query or a fragment"},
		{"http://billing/v1#", "must not have a query or a fragment"},
		{"http://billing/v1#top", "must not have a query or a fragment"},
	} {
		got := framework.BaseURLProblem(tc.url, "a header")
		if (tc.problem == "") != (got == "") || !strings.Contains(got, tc.problem) {
			t.Errorf("BaseURLProblem(%q) = %q, want %q", tc.url, got, tc.problem)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("BaseURLProblem(%q) repeats the credentials: %q", tc.url, got)
		}
	}
}

func TestPortProblem(t *testing.T) {
	t.Parallel()
	for port, bad := range map[string]bool{
		"": false, "1": false, "80": false, "65535": false, "https": false,
		"0": true, "00": true, "65536": true, "99999": true, "18446744073709551617": true,
	} {
		if got := framework.PortProblem(port); (got != "") != bad {
			t.Errorf("PortProblem(%q) = %q, want a problem: %v", port, got, bad)
		}
	}
}
