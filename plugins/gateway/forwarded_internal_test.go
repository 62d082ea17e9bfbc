package gateway

import (
	"net/http"
	"net/netip"
	"testing"
)

// The forwarded headers for each form of peer address net/http can report,
// trusted and not: IPv4, IPv6 (bracketed and quoted in Forwarded), an
// IPv4-mapped IPv6 address (written as IPv4), and an address with no port.
func TestForwardedHeaderValues(t *testing.T) {
	p := &Plugin{trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	cases := []struct {
		remote, host string
		inbound      http.Header
		xff, fwd     string
	}{
		{remote: "192.0.2.7:5000", host: "api.example", xff: "192.0.2.7", fwd: "for=192.0.2.7;proto=http;host=api.example"},
		{remote: "[2001:db8::1]:5000", host: "api.example:8080", xff: "2001:db8::1", fwd: `for="[2001:db8::1]";proto=http;host="api.example:8080"`},
		{remote: "[::ffff:192.0.2.7]:5000", host: "api.example", xff: "192.0.2.7", fwd: "for=192.0.2.7;proto=http;host=api.example"},
		{remote: "unix", host: "", xff: "unix", fwd: "for=unix;proto=http"},
		// An untrusted peer's own claims are dropped.
		{remote: "192.0.2.7:5000", host: "api.example", inbound: http.Header{"X-Forwarded-For": {"6.6.6.6"}, "Forwarded": {"for=6.6.6.6"}},
			xff: "192.0.2.7", fwd: "for=192.0.2.7;proto=http;host=api.example"},
		// A trusted one's are kept and extended.
		{remote: "10.1.2.3:5000", host: "api.example", inbound: http.Header{"X-Forwarded-For": {"203.0.113.9"}, "Forwarded": {"for=203.0.113.9"}},
			xff: "203.0.113.9, 10.1.2.3", fwd: "for=203.0.113.9, for=10.1.2.3;proto=http;host=api.example"},
	}
	for _, c := range cases {
		in := &http.Request{RemoteAddr: c.remote, Host: c.host, Header: c.inbound}
		if in.Header == nil {
			in.Header = http.Header{}
		}
		h := http.Header{}
		p.forwarded(in, h, "", nil)
		if got := h.Get("X-Forwarded-For"); got != c.xff {
			t.Errorf("%s: X-Forwarded-For = %q, want %q", c.remote, got, c.xff)
		}
		if got := h.Get("Forwarded"); got != c.fwd {
			t.Errorf("%s: Forwarded = %q, want %q", c.remote, got, c.fwd)
		}
		if got := h.Get("X-Forwarded-Host"); got != c.host {
			t.Errorf("%s: X-Forwarded-Host = %q, want %q", c.remote, got, c.host)
		}
		// Each value is a slice of its own: appending to one does not
		// change another.
		h["X-Forwarded-For"] = append(h["X-Forwarded-For"], "x")
		if got := h.Get("X-Forwarded-Proto"); got != "http" {
			t.Errorf("%s: X-Forwarded-Proto = %q after an append to X-Forwarded-For", c.remote, got)
		}
	}
}

func TestAppendForwardedValue(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"", ""},
		{"192.0.2.7", "192.0.2.7"},
		{"api.example", "api.example"},
		{"!#$%&'*+-.^_`|~09azAZ", "!#$%&'*+-.^_`|~09azAZ"},
		{"api.example:8080", `"api.example:8080"`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{`"\`, `"\"\\"`},
		{`x y"`, `"x y\""`},
		{"é", "\"é\""},
	}
	for _, c := range cases {
		if got := string(appendForwardedValue([]byte("for="), c.in)); got != "for="+c.want {
			t.Errorf("appendForwardedValue(%q) = %q, want %q", c.in, got, "for="+c.want)
		}
	}
}
