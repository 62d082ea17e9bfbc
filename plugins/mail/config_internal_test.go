package mail

import "testing"

// TestLoopbackClassifiesAddresses: the clear-text password rule takes every
// loopback address in every written form, and nothing else; names other than
// localhost are never resolved (nothing is dialled).
func TestLoopbackClassifiesAddresses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LocalHost", true},
		{"127.0.0.1", true},
		{"127.0.0.2", true},
		{"127.1.2.3", true},
		{"127.255.255.255", true},
		{"::1", true},
		{"0:0:0:0:0:0:0:1", true},
		{"0000:0000:0000:0000:0000:0000:0000:0001", true},
		{"::ffff:127.0.0.1", true},
		{"::1%lo", true},
		{"128.0.0.1", false},
		{"126.255.255.255", false},
		{"10.0.0.1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"::2", false},
		{"fe80::1", false},
		{"::ffff:10.0.0.1", false},
		{"[::1]", false}, // a host is written without brackets: it would not dial
		{"127.1", false}, // not an address netip parses: a name, never resolved
		{"0x7f.0.0.1", false},
		{"localhost.", false},
		{"localhost.example.com", false},
		{"127.0.0.1.example.com", false},
		{"smtp.example.com", false},
		{"", false},
	} {
		if got := loopback(c.host); got != c.want {
			t.Errorf("loopback(%q) = %v, want %v", c.host, got, c.want)
		}
	}
}
