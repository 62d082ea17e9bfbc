package egress

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The classification as a table over addresses: none of them is dialled.
func TestNonGlobal(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		// IPv4 special-purpose registry.
		"0.0.0.0": "unspecified", "0.1.2.3": "unspecified",
		"10.0.0.1": "private", "172.16.3.4": "private", "172.31.255.255": "private", "192.168.1.1": "private",
		"100.64.0.1": "shared address space", "100.100.100.200": "shared address space", "100.127.255.255": "shared address space",
		"127.0.0.1": "loopback", "127.9.9.9": "loopback",
		"169.254.169.254": "link-local",
		"192.0.0.1":       "IETF protocol assignment", "192.0.0.170": "IETF protocol assignment",
		"192.0.2.1": "documentation", "198.51.100.7": "documentation", "203.0.113.9": "documentation",
		"192.88.99.1": "6to4 relay anycast",
		"198.18.0.1":  "benchmarking", "198.19.255.254": "benchmarking",
		"224.0.0.251": "multicast", "239.1.2.3": "multicast",
		"240.0.0.1": "reserved", "255.255.255.255": "reserved",
		"::ffff:127.0.0.1": "loopback", "::ffff:10.1.2.3": "private", "::ffff:100.64.0.1": "shared address space",
		// IPv6 special-purpose registry.
		"::": "unspecified", "::1": "loopback",
		"::7f00:1": "IPv4-compatible", "::a01:203": "IPv4-compatible", "::808:808": "IPv4-compatible",
		"64:ff9b:1::a00:1": "local-use NAT64", "64:ff9b:1:ffff::808:808": "local-use NAT64",
		"100::1": "discard-only", "100:0:0:1::1": "dummy",
		"2001:2::1": "benchmarking", "2001:10::1": "ORCHID",
		"2001:db8::1": "documentation", "2001:db8:ffff::1": "documentation", "3fff::1": "documentation",
		"5f00::1": "segment routing",
		"fc00::1": "private", "fd12:3456::1": "private",
		"fe80::1": "link-local", "febf::1": "link-local", "fec0::1": "site-local",
		"ff02::1": "multicast", "ff0e::1": "multicast",
		// IPv4 embedded in IPv6.
		"64:ff9b::7f00:1":    "loopback, inside a NAT64 address",
		"64:ff9b::a9fe:a9fe": "link-local, inside a NAT64 address",
		"64:ff9b::c0a8:101":  "private, inside a NAT64 address",
		"64:ff9b::6440:1":    "shared address space, inside a NAT64 address",
		"2002:7f00:1::":      "loopback, inside a 6to4 address",
		"2002:a00:1:1::1":    "private, inside a 6to4 address",
		"2002:a9fe:a9fe::":   "link-local, inside a 6to4 address",
		// Teredo: server 65.54.227.120 (public); client stored inverted:
		// ^0x7f000001 = 0x80fffffe is 127.0.0.1, ^0x0a000001 = 0xf5fffffe is 10.0.0.1.
		"2001:0:4136:e378:8000:63bf:80ff:fffe": "loopback, inside a Teredo address",
		"2001:0:4136:e378:8000:63bf:f5ff:fffe": "private, inside a Teredo address",
		"2001:0:a00:1:8000:63bf:3fff:fdd2":     "private, inside a Teredo address (its server)",

		// Global unicast: allowed.
		"8.8.8.8": "", "1.1.1.1": "", "172.32.0.1": "", "192.169.0.1": "", "100.63.255.255": "", "100.128.0.1": "",
		"192.0.1.1": "", "198.17.255.255": "", "198.20.0.1": "", "223.255.255.255": "",
		"2001:4860:4860::8888": "", "2606:4700:4700::1111": "", "::ffff:8.8.8.8": "",
		"64:ff9b::808:808": "", // NAT64 of a public address
		"2002:808:808::1":  "", // 6to4 of a public address
		// Teredo: public server, client 8.8.8.8 stored inverted.
		"2001:0:4136:e378:8000:63bf:f7f7:f7f7": "",
		// RFC 4380's example: its client, 192.0.2.45, is a documentation address.
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": "documentation, inside a Teredo address",
	} {
		got := NonGlobal(netip.MustParseAddr(addr))
		if got != want {
			t.Errorf("NonGlobal(%s) = %q, want %q", addr, got, want)
		}
	}
}

// The host's own addresses are refused by default, read from its
// interfaces; AllowOwnAddresses and allow_hosts let them through.
func TestGuardOwnAddresses(t *testing.T) {
	t.Parallel()
	own := netip.MustParseAddr("8.8.4.4") // a public address standing for one of this host's
	g := NewGuard(GuardOpts{Client: "c"})
	g.own = map[netip.Addr]bool{own: true}
	if got := g.Refuses(own); got != "this host's own address" {
		t.Errorf("own address: %q, want refused", got)
	}
	if got := g.Refuses(netip.MustParseAddr("::ffff:8.8.4.4")); got != "this host's own address" {
		t.Errorf("own address, IPv4-mapped: %q, want refused", got)
	}
	if got := g.Refuses(netip.MustParseAddr("8.8.8.8")); got != "" {
		t.Errorf("another public address: %q, want allowed", got)
	}
	if g := NewGuard(GuardOpts{AllowOwnAddresses: true}); g.own != nil {
		t.Errorf("AllowOwnAddresses: the guard holds %v", g.own)
	}
	allowed := NewGuard(GuardOpts{AllowHosts: []string{"8.8.4.4", "10.1.0.0/16"}})
	allowed.own = map[netip.Addr]bool{own: true}
	for _, a := range []string{"8.8.4.4", "10.1.2.3"} {
		if got := allowed.Refuses(netip.MustParseAddr(a)); got != "" {
			t.Errorf("allow_hosts holds %s: %q, want allowed", a, got)
		}
	}
	if got := allowed.Refuses(netip.MustParseAddr("10.2.0.1")); got != "private" {
		t.Errorf("10.2.0.1 outside allow_hosts: %q, want private", got)
	}

	// The addresses held are the interfaces' own.
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("this host's interfaces cannot be read: %v", err)
	}
	held := NewGuard(GuardOpts{}).own
	for _, a := range addrs {
		p := netip.MustParsePrefix(a.String())
		if !held[p.Addr().Unmap()] {
			t.Errorf("interface address %s is not held", p.Addr())
		}
	}
}

func TestAddressError(t *testing.T) {
	t.Parallel()
	g := NewGuard(GuardOpts{Client: "webhooks", Kind: "shared client", Fix: "name the host in allow_hosts"})
	err := g.control("tcp4", "100.100.100.200:80", nil)
	if !errors.Is(err, ErrAddressNotAllowed) {
		t.Fatalf("err = %v, want ErrAddressNotAllowed", err)
	}
	want := "shared client 'webhooks' refuses to connect to 100.100.100.200 (shared address space): name the host in allow_hosts"
	if err.Error() != want {
		t.Errorf("err = %q\nwant %q", err, want)
	}
	if err := g.control("tcp6", "[2606:4700:4700::1111]:443", nil); err != nil {
		t.Errorf("a public address: %v", err)
	}
	if err := g.control("tcp", "nonsense", nil); !strings.Contains(fmtErr(err), "unreadable") {
		t.Errorf("an unreadable address: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
