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
