// Package egress builds the connections a jfast service opens to other hosts:
// one dialer and one transport constructor that the http, gateway and llm
// plugins share, so their connection rules cannot drift apart.
//
// The rules:
//
//   - No proxy from the environment. HTTP_PROXY and HTTPS_PROXY are ignored:
//     a proxy would receive every request with its bearer token or API key.
//     A proxy is used only when named ([TransportOpts.Proxy]).
//   - An optional [Guard] on the dialer refuses addresses that are not
//     globally reachable (the IANA special-purpose registries' non-global
//     ranges, IPv4 and IPv6), an IPv4 address of those kinds embedded in an
//     IPv6 one (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo), and the
//     host's own addresses. It checks the address connected to, after DNS
//     resolution, for every address tried.
//
// It also holds the instance set of an upstream with several instances
// ([Instances]): a static list, or the addresses a DNS name resolves to,
// again every ResolveEvery, each refused address left out when the set is
// given a guard's [Guard.Refuses]; and the choice of one instance per
// attempt ([Instances.Pick], power of two choices over outstanding
// attempts). The http plugin's instances and the grpc plugin's discovered
// instances use it, each instance with a breaker of its own.
//
// # Example
//
//	guard := egress.NewGuard(egress.GuardOpts{Client: "webhooks", Fix: "name the host in allow_hosts"})
//	t := egress.NewTransport(egress.TransportOpts{
//		ConnectTimeout: 2 * time.Second,
//		Dial:           guard.Dial(2 * time.Second),
//		MaxConnsPerHost: 50,
//	})
//
// docs/security.md lists what the guard refuses and the tests that show it.
package egress
