// Package drills takes dependencies away from a running jfast service and gives
// them back, to prove what the framework promises: the route answers its
// documented status within its deadline, /ready names the dependency, and the next
// request after recovery succeeds on the same App and pools.
//
// The faults:
//
//   - pause: the dependency's socket stays open and nothing answers — SIGSTOP on a
//     server the harness started itself ([StartRedis], [StartPostgres]), or
//     docker pause of a container the user names;
//   - refuse: nothing listens;
//   - through a [Proxy] in front of any address: blackhole, latency and reset.
//
// Drills never pause a server they did not start or were not given: the
// machine's shared servers are reached through a [Proxy].
package drills
