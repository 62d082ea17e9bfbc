package queue

// DisableWorkers makes this process enqueue and manage the dead letter without
// running jobs, whatever workers says: for tools such as the CLI's
// "jfast queue dead list|retry|delete", which start the App to reach the broker
// but must not take jobs. Call it after framework.New (which binds the
// configuration) and before the App starts.
func (p *Plugin) DisableWorkers() { p.cfg.Workers = false }
