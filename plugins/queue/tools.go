package queue

// DisableWorkers makes this process enqueue and manage the dead letter without
// running jobs, whatever workers says: for a tool of the service's own that
// manages the dead letter through DeadJobs, RetryDead, DeleteDead and
// CountDeadJobs (jfast has no command for it), which starts the App to reach
// the broker but must not take jobs. Call it after framework.New (which binds the
// configuration) and before the App starts.
func (p *Plugin) DisableWorkers() { p.cfg.Workers = false }
