package http_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework/resilience"
	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// The address guard checks the address connected to, after resolution: a
// host name that resolves to 127.0.0.1 ("localhost") is refused as the
// literal is: unsent, not retried and no breaker evidence; the
// escapes let it through.
func TestSharedAddressGuard(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, status(200))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
	byName := "http://localhost:" + port + "/hook"
	byIP := up.URL + "/hook"

	guarded, _, reg := newShared(t, jhttp.SharedConfig{AllowHosts: []string{},
		Upstream: noBudget(jhttp.Upstream{PolicyConfig: resilience.PolicyConfig{BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}})})
	for _, target := range []string{byName, byIP, "http://[::1]:" + port + "/hook", "http://0.0.0.0:" + port + "/hook"} {
		_, err := guarded.Get(context.Background(), target)
		var un *jhttp.UpstreamUnavailable
		if !errors.As(err, &un) || !errors.Is(err, jhttp.ErrAddressNotAllowed) {
			t.Fatalf("%s: err = %v, want UpstreamUnavailable wrapping ErrAddressNotAllowed", target, err)
		}
		if !strings.Contains(err.Error(), "allow_private") || !strings.Contains(err.Error(), "allow_hosts") {
			t.Errorf("%s: the error does not say how to allow it: %v", target, err)
		}
	}
	if up.hits.Load() != 0 {
		t.Errorf("the server got %d requests", up.hits.Load())
	}
	if got := metric(t, reg, "jfast_client_attempts_total", "dependency", "webhooks"); got != 4 {
		t.Errorf("%v attempts for 4 refused calls, want 4 (never retried)", got)
	}
	if s := guarded.Breaker(byName).Snapshot(); s.State != resilience.StateClosed || s.WindowCalls != 0 {
		t.Errorf("a refusal counted for the breaker: %+v", s)
	}

	for name, s := range map[string]jhttp.SharedConfig{
		"allow_hosts names the host":    {AllowHosts: []string{"LOCALHOST"}},
		"allow_hosts holds its network": {AllowHosts: []string{"127.0.0.0/8"}},
		"allow_private":                 {AllowPrivate: true},
	} {
		c, _, _ := newShared(t, s)
		resp, err := c.Get(context.Background(), byName)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v, want 200", name, resp, err)
		}
	}
	// Naming a host allows that host only: the literal address stays refused.
	c, _, _ := newShared(t, jhttp.SharedConfig{AllowHosts: []string{"localhost"}})
	if _, err := c.Get(context.Background(), byIP); !errors.Is(err, jhttp.ErrAddressNotAllowed) {
		t.Errorf("allow_hosts = [localhost], a call to 127.0.0.1: %v, want refused", err)
	}
}
