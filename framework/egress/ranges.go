package egress

import (
	"encoding/binary"
	"net/netip"
)

// The ranges refused as not globally reachable come from the IANA IPv4 and
// IPv6 Special-Purpose Address Registries (entries whose "Globally
// Reachable" is False), plus multicast and the deprecated site-local
// range, which no call to another service's API goes to. Entries the
// registries mark globally reachable (192.0.0.9/32, the AS112 and AMT
// ranges, ORCHIDv2) are allowed, except where a wider refused block
// holds them (192.0.0.0/24 is refused whole: it is protocol plumbing).
var nonGlobal = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"}, // "this network": 0.0.0.0 reaches this host
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space"}, // carrier NAT; 100.100.100.200 is a cloud metadata service
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"}, // 169.254.169.254 is a cloud metadata service
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255, limited broadcast

	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"}, // deprecated; ::a.b.c.d is refused whatever a.b.c.d is
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("100:0:0:1::/64"), "dummy"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	{netip.MustParsePrefix("2001:10::/28"), "ORCHID"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("5f00::/16"), "segment routing"},
	{netip.MustParsePrefix("fc00::/7"), "private"}, // unique-local
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// IPv6 ranges that carry an IPv4 address, which is checked as if connected
// to directly: a NAT64 gateway or a 6to4 or Teredo relay would take the
// connection there.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052: the IPv4 address is the last 32 bits
	sixToF  = netip.MustParsePrefix("2002::/16")    // RFC 3056: bits 16–47
	teredo  = netip.MustParsePrefix("2001::/32")    // RFC 4380: server in bits 32–63, client inverted in 96–127
	mapped4 = netip.MustParsePrefix("::ffff:0:0/96")
)

// NonGlobal says which kind of address that is not globally reachable ip is
// ("loopback", "private", "shared address space", ...), or "" when it is a
// global unicast address. An IPv4 address embedded in an IPv6 one
// (IPv4-mapped, NAT64, 6to4, Teredo) is judged as the IPv4 address, and the
// reason says where it was found.
func NonGlobal(ip netip.Addr) string {
	if mapped4.Contains(ip) {
		ip = ip.Unmap()
	}
	for _, r := range nonGlobal {
		if r.prefix.Contains(ip) {
			return r.reason
		}
	}
	if !ip.Is6() {
		return ""
	}
	b := ip.As16()
	var v4 [4]byte
	var via string
	switch {
	case nat64.Contains(ip):
		copy(v4[:], b[12:16])
		via = "NAT64"
	case sixToF.Contains(ip):
		copy(v4[:], b[2:6])
		via = "6to4"
	case teredo.Contains(ip):
		// The server's address is plain; the client's is stored with every
		// bit inverted, so that NAT cannot rewrite it.
		if r := NonGlobal(netip.AddrFrom4([4]byte(b[4:8]))); r != "" {
			return r + ", inside a Teredo address (its server)"
		}
		binary.BigEndian.PutUint32(v4[:], ^binary.BigEndian.Uint32(b[12:16]))
		via = "Teredo"
	default:
		return ""
	}
	if r := NonGlobal(netip.AddrFrom4(v4)); r != "" {
		return r + ", inside a " + via + " address"
	}
	return ""
}
