package bench

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used. Benchmarks
// pin their goroutine to its thread and report CPU time per operation
// next to wall time: on a shared machine the wall time also counts the
// time the thread spent waiting for a core.
func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
