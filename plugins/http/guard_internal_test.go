package http

import (
	"net/netip"
	"testing"
)

func TestInternalAddress(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "127.9.9.9": "loopback", "::1": "loopback", "::ffff:127.0.0.1": "loopback",
		"10.0.0.1": "private", "172.16.3.4": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"fc00::1": "private", "fd12:3456::1": "private", "::ffff:10.1.2.3": "private",
		"169.254.169.254": "link-local", "fe80::1": "link-local", "224.0.0.251": "link-local",
		"0.0.0.0": "unspecified", "0.1.2.3": "unspecified", "::": "unspecified",
		"8.8.8.8": "", "172.32.0.1": "", "192.169.0.1": "", "2001:4860:4860::8888": "", "100.64.0.1": "",
	} {
		ip := netip.MustParseAddr(addr).Unmap()
		if got := internalAddress(ip); got != want {
			t.Errorf("internalAddress(%s) = %q, want %q", addr, got, want)
		}
	}
}
