// Package drills takes dependencies away from a running jfast service and gives
// them back, to prove what the framework promises: the route answers its
// documented status within its deadline, /ready names the dependency, routes
// that do not use it keep answering, and the next request after recovery
// succeeds on the same App and pools.
//
// The faults:
//
//   - pause: the dependency's socket stays open and nothing answers — SIGSTOP on a
//     server the harness started itself ([StartRedis], [StartPostgres] (the
//     postmaster and every backend), [StartS3], [StartSMTP]), or docker pause of a
//     [Container]: one on a private [Engine] ([StartEngine]) or one the user
//     names in JFAST_DRILL_<DEP>_CONTAINER ([UserContainer]);
//   - refuse: nothing listens;
//   - through a [Proxy] in front of any address: blackhole, hold, hang existing,
//     latency and reset.
//
// A [Drill] runs one scenario against a service over HTTP and returns a
// [Result]: time to first answer, requests that paid a deadline, the latency of
// the answers that followed, /ready's status and the time to recover.
// [Markdown], [Text] and [WriteReport] render the table. [RunService] is what
// `jfast drill` calls for a service that is already running.
//
// Drills never pause a server they did not start or were not given: the
// machine's shared servers are reached through a [Proxy]. See docs/drills.md.
package drills
