//go:build race

package scenarios_test

import "time"

// Under the race detector the load generator, in the test's own process,
// is several times slower: the handler's CPU slice is 10 ms, so 4× the
// capacity is a rate it keeps up with.
const overloadCPU = 10 * time.Millisecond
