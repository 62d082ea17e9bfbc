package http

import (
	"github.com/jfastframework/jfast/framework/egress"
)

// ErrAddressNotAllowed is the cause (errors.Is) of a shared client's call
// refused because the host resolved to an address its guard does not allow:
// one that is not globally reachable (loopback, private, link-local, shared
// address space, documentation, benchmarking, reserved, multicast, or an
// IPv6 address embedding such an IPv4 one) or one of this host's own, unless
// allow_private, allow_own_addresses or allow_hosts says otherwise. The call
// fails at once with an [UpstreamUnavailable]; it is not retried and is no
// breaker evidence. It is egress.ErrAddressNotAllowed.
var ErrAddressNotAllowed = egress.ErrAddressNotAllowed

// guardFix is how a refused address is allowed, in a shared client's keys.
const guardFix = "set allow_private = true (or allow_own_addresses = true for this host's addresses), or name the host in allow_hosts, to call it"

// sharedDial returns the dialer of a shared client's transport:
// connect_timeout, and the address guard on every address (see
// egress.Guard) unless allow_private turns it off.
func sharedDial(s SharedConfig) dialFunc {
	if s.AllowPrivate {
		return nil
	}
	g := egress.NewGuard(egress.GuardOpts{
		Client: s.Name, Kind: "shared client", AllowHosts: s.AllowHosts,
		AllowOwnAddresses: s.AllowOwnAddresses, Fix: guardFix,
	})
	return g.Dial(s.ConnectTimeout)
}
