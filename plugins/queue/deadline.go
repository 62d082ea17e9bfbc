package queue

// The enqueues whose caller's context never ends (context.Background(),
// context.WithoutCancel...), on a backend that takes it
// ([sharedTimerBackend]), are timed by one timer shared by those in flight
// (internal/deadline, as the http plugin's calls are) instead of a timer
// context each. On a redis enqueue, a new context.WithTimeout per call
// measured as the largest share of the plugin's overhead over bare asynq,
// far more than its own processor time; re-arming one timer costs a fraction
// of it (docs/performance.md). A caller's context that can end keeps
// context.WithDeadline, so that its end reaches the enqueue as the context
// package passes it on.

// sharedTimerBackend is a backend whose Enqueue may run under a
// deadline.Context: its client derives no context from the enqueue's on its
// usual path. A context the context package derives from a
// deadline.Context registers with it, but one derived through a
// context.WithValue on top of it is watched by a goroutine of its own; pgx
// derives every query's context so, which on the postgres backend cost more
// than the shared timer saved.
type sharedTimerBackend interface {
	Backend
	// derivesNoContext marks the backend.
	derivesNoContext()
}
