package http

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrAddressNotAllowed is the cause (errors.Is) of a shared client's call
// refused because the host resolved to an address its guard does not allow:
// loopback, private, link-local or unspecified, unless allow_private or
// allow_hosts says otherwise. The call fails at once with an
// [UpstreamUnavailable]; it is not retried and is no breaker evidence.
var ErrAddressNotAllowed = errors.New("address not allowed")

// addressGuard refuses a shared client's connections to addresses inside the
// service's own network. It checks the address being connected to, after DNS
// resolution and for every address tried, so a name that resolves to a public
// address when checked and to a private one when used (DNS rebinding) is
// refused all the same.
type addressGuard struct {
	client       string
	allowPrivate bool
	hosts        map[string]bool // allow_hosts names and IP literals, lower case
	nets         []netip.Prefix  // allow_hosts networks
}

func newAddressGuard(s SharedConfig) *addressGuard {
	g := &addressGuard{client: s.Name, allowPrivate: s.AllowPrivate, hosts: map[string]bool{}}
	for _, h := range s.AllowHosts {
		if p, err := netip.ParsePrefix(h); err == nil {
			g.nets = append(g.nets, p.Masked())
			continue
		}
		g.hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	return g
}

// dial returns the dialer of a shared client's transport: connect_timeout,
// and the guard on every address unless the host is allowed by name.
func (g *addressGuard) dial(connectTimeout time.Duration) dialFunc {
	plain := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	if g.allowPrivate {
		return plain.DialContext
	}
	guarded := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && g.hosts[strings.ToLower(host)] {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}

// control runs on every address the dialer is about to connect to.
func (g *addressGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &addressError{client: g.client, addr: address, reason: "unreadable"}
	}
	ip := ap.Addr().Unmap()
	for _, n := range g.nets {
		if n.Contains(ip) {
			return nil
		}
	}
	if reason := internalAddress(ip); reason != "" {
		return &addressError{client: g.client, addr: ip.String(), reason: reason}
	}
	return nil
}

// internalAddress says which kind of address inside the service's own
// network (or this host) ip is, or "".
func internalAddress(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local" // 169.254.169.254, a cloud's metadata service, is one
	case ip.IsUnspecified(), ip.Is4() && ip.As4()[0] == 0:
		return "unspecified" // 0.0.0.0 and ::, which reach this host
	}
	return ""
}

// addressError is a connection the guard refused.
type addressError struct {
	client, addr, reason string
}

func (e *addressError) Error() string {
	return fmt.Sprintf("shared client '%s' refuses to connect to %s, a %s address: set allow_private = true, or name the host in allow_hosts, to call it",
		e.client, e.addr, e.reason)
}

// Is makes errors.Is(err, ErrAddressNotAllowed) true.
func (e *addressError) Is(target error) bool { return target == ErrAddressNotAllowed }
