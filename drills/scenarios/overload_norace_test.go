//go:build !race

package scenarios_test

import "time"

// overloadCPU is the handler's CPU slice: the benchmark's 2 ms.
const overloadCPU = 2 * time.Millisecond
