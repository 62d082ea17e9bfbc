//go:build unix

package framework

import (
	"runtime"
	"sync"
	"syscall"
	"time"
)

// procCPU reads how busy the process kept the CPUs it may use: its CPU time
// (getrusage) over GOMAXPROCS × the wall time since the last reading.
type procCPU struct {
	mu       sync.Mutex
	at       time.Time
	cpu      time.Duration
	readings func() (time.Duration, bool)
}

func newProcCPU() *procCPU {
	p := &procCPU{readings: selfCPU}
	cpu, ok := p.readings()
	if !ok {
		return nil
	}
	p.at, p.cpu = time.Now(), cpu
	return p
}

func selfCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// busy returns the share (0 to about 1) of GOMAXPROCS CPUs the process used
// since the last call, or 1 when it cannot tell.
func (p *procCPU) busy() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	cpu, ok := p.readings()
	now := time.Now()
	wall := now.Sub(p.at)
	used := cpu - p.cpu
	p.at, p.cpu = now, cpu
	if !ok || wall <= 0 {
		return 1
	}
	return float64(used) / (float64(wall) * float64(runtime.GOMAXPROCS(0)))
}
