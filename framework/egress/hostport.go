package egress

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// HostPort returns host:port as two listings of one server compare, for a
// plugin's check that each instance is listed once: an IP address in its one
// form ([::1], not [0:0::1]; an IPv4 address written as IPv6,
// [::ffff:10.0.0.7], as the IPv4 address it dials), any other host in lower
// case (a DNS name ignores case), the port as a number (9000, not 09000). A
// name with a trailing dot stays another name: under a resolver's search
// list "billing" and "billing." can be two hosts.
func HostPort(host, port string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	} else {
		host = strings.ToLower(host)
	}
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n)
	}
	return net.JoinHostPort(host, port)
}
