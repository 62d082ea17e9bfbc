package openloop

import (
	"crypto/sha256"
	"runtime"
	"syscall"
	"time"
)

// Burn uses d of CPU time on the calling goroutine's thread: hashing in
// short steps until the thread's CPU clock has moved by d, so a thread that
// waits for a core meanwhile still does the same work.
func Burn(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	if !ok {
		burnWall(d)
		return
	}
	var buf [32]byte
	for {
		for range 16 {
			buf = sha256.Sum256(buf[:])
		}
		now, _ := threadCPU()
		if now-start >= d {
			return
		}
	}
}

func threadCPU() (time.Duration, bool) {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
