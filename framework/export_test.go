package framework

import "time"

// SettleStatusReadings waits for the status page's reading in progress, if
// any (tests only: the readings are taken beside the calls, on their own).
func (a *App) SettleStatusReadings() {
	if a.status != nil {
		a.status.Settle()
	}
}

// WarnAdminExposure logs what the boot logs about app.admin_listen's reach.
func (a *App) WarnAdminExposure() { a.warnAdminExposure(a.Config().AdminListen) }

// SetCPUWait gives l the signal of goroutines' wait for a CPU (the App
// gives the Go scheduler's).
func SetCPUWait(l *Limiter, f func() time.Duration) { l.cpuWait = f }

// SetCPUBusy gives l the signal of a goroutine waiting for a CPU now (the
// App gives the Go scheduler's run queues).
func SetCPUBusy(l *Limiter, f func() bool) { l.cpuBusy = f }

// SchedulerSignals reports whether the Go scheduler's readings the App
// gives its Limiter exist on this Go: the wait for a CPU and the run queues.
func SchedulerSignals() (cpuWait, cpuBusy bool) {
	return newSchedWait() != nil, newRunQueue() != nil
}

// FollowFraming gives stream to a new connection's framing check in reads
// of at most n bytes (all at once for n <= 0), as the server reads them,
// and returns the number of heads it read and the 1-based number of the
// first head framed two ways (0 for none).
func FollowFraming(stream []byte, n int) (heads, ambiguousAt int64) {
	c := &framingConn{}
	for len(stream) > 0 {
		k := len(stream)
		if n > 0 {
			k = min(k, n)
		}
		c.follow(stream[:k])
		stream = stream[k:]
	}
	return c.heads, c.ambiguousAt.Load()
}
