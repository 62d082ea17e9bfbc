package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrAddressNotAllowed is the cause (errors.Is) of a connection a [Guard]
// refused.
var ErrAddressNotAllowed = errors.New("address not allowed")

// GuardOpts configures a [Guard].
type GuardOpts struct {
	// Client names the client in the refusal's message.
	Client string
	// Kind is what Client is, in the message ("shared client",
	// "provider"). Defaults to "client".
	Kind string
	// AllowHosts are host names (matched exactly, ignoring case), IP
	// addresses and networks ("10.1.0.0/16") allowed even when they are, or
	// resolve to, refused addresses. Entries that are none of these are
	// ignored; the plugin validates them first (see [ValidAllowHost]).
	AllowHosts []string
	// AllowOwnAddresses lets the client connect to this host's own
	// addresses (those of its network interfaces) when they are otherwise
	// globally reachable. Defaults to false: they are refused.
	AllowOwnAddresses bool
	// Fix ends the refusal's message: how to allow the address, in the
	// plugin's keys.
	Fix string
}

// Guard refuses connections to addresses inside the service's own network
// or on this host. It checks the address being connected to, after DNS
// resolution and for every address tried, so a name that resolves to a
// public address when checked and to a private one when used (DNS
// rebinding) is refused all the same. A Guard is safe for concurrent use.
type Guard struct {
	opts  GuardOpts
	hosts map[string]bool // AllowHosts names and IP literals, lower case
	nets  []netip.Prefix  // AllowHosts networks
	own   map[netip.Addr]bool
}

// NewGuard returns a guard. Unless AllowOwnAddresses, it holds the host's
// interface addresses, read once per process (at the first guard made).
func NewGuard(o GuardOpts) *Guard {
	g := &Guard{opts: o, hosts: map[string]bool{}}
	g.opts.Kind = cmp.Or(o.Kind, "client")
	for _, h := range o.AllowHosts {
		if p, err := netip.ParsePrefix(h); err == nil {
			g.nets = append(g.nets, p.Masked())
			continue
		}
		g.hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	if !o.AllowOwnAddresses {
		g.own = hostAddresses()
	}
	return g
}

// hostAddresses is this host's interface addresses, read once: interfaces
// rarely change under a running service, and reading them per connection
// costs a netlink round trip. A host whose interfaces cannot be read has
// none here; its loopback and private addresses stay refused by range.
var hostAddresses = sync.OnceValue(func() map[netip.Addr]bool {
	own := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return own
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			own[p.Addr().Unmap()] = true
		}
	}
	return own
})

// Dial returns a dialer with connectTimeout that checks every address it
// connects to, unless the host is allowed by name.
func (g *Guard) Dial(connectTimeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	plain := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	guarded := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && g.hosts[strings.ToLower(host)] {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}

// control runs on every address the dialer is about to connect to.
func (g *Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &AddressError{Client: g.opts.Client, Kind: g.opts.Kind, Addr: address, Reason: "unreadable", fix: g.opts.Fix}
	}
	if reason := g.Refuses(ap.Addr()); reason != "" {
		return &AddressError{Client: g.opts.Client, Kind: g.opts.Kind, Addr: ap.Addr().Unmap().String(), Reason: reason, fix: g.opts.Fix}
	}
	return nil
}

// Refuses says why the guard refuses a connection to ip ("loopback",
// "shared address space", "this host's own address", ...), or "" when it allows it.
func (g *Guard) Refuses(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, n := range g.nets {
		if n.Contains(ip) {
			return ""
		}
	}
	if g.hosts[ip.String()] {
		return ""
	}
	if reason := NonGlobal(ip); reason != "" {
		return reason
	}
	if g.own[ip] {
		return "this host's own address"
	}
	return ""
}

// AddressError is a connection a [Guard] refused. errors.Is(err,
// ErrAddressNotAllowed) is true.
type AddressError struct {
	Client, Kind, Addr, Reason string
	fix                        string
}

func (e *AddressError) Error() string {
	msg := fmt.Sprintf("%s '%s' refuses to connect to %s (%s)", e.Kind, e.Client, e.Addr, e.Reason)
	if e.fix != "" {
		msg += ": " + e.fix
	}
	return msg
}

// Is makes errors.Is(err, ErrAddressNotAllowed) true.
func (e *AddressError) Is(target error) bool { return target == ErrAddressNotAllowed }

// ValidAllowHost reports whether h is a bare host name, an IP address or a
// network, as an allow_hosts entry must be.
func ValidAllowHost(h string) bool {
	if _, err := netip.ParsePrefix(h); err == nil {
		return true
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return true
	}
	if h == "" || strings.ContainsAny(h, ":/@ ") {
		return false
	}
	for _, r := range h {
		if !(r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
