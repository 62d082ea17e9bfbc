package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// This file is the queue's side of framework.Jobs, the contract through which
// other plugins (mail) enqueue and handle jobs without importing this package.

// RegisterJob implements framework.Jobs: fn handles kind with the job's raw JSON
// payload. An error fn returns that wraps a *framework.PermanentError sends the
// job to the dead letter at once, as Permanent does.
func (p *Plugin) RegisterJob(kind string, fn func(ctx context.Context, payload []byte) error) error {
	if fn == nil {
		return fmt.Errorf("queue: handler for %q is nil", kind)
	}
	return Handle(p, kind, func(ctx context.Context, raw json.RawMessage) error {
		err := fn(ctx, raw)
		if err == nil || IsPermanent(err) {
			return err
		}
		var pe *framework.PermanentError
		if errors.As(err, &pe) {
			if err == error(pe) {
				return Permanent(pe.Err) // avoid "permanent: permanent: ..."
			}
			return Permanent(err)
		}
		return err
	})
}

// EnqueueJob implements framework.Jobs: payload must be JSON. opts.Tx, when
// set, must be a pgx.Tx, and the backend must be postgres.
func (p *Plugin) EnqueueJob(ctx context.Context, kind string, payload []byte, opts framework.JobOptions) error {
	if !json.Valid(payload) {
		return fmt.Errorf("queue: payload of %s job is not JSON", kind)
	}
	var o []Option
	if opts.Queue != "" {
		o = append(o, Queue(opts.Queue))
	}
	if opts.MaxAttempts > 0 {
		o = append(o, MaxAttempts(opts.MaxAttempts))
	}
	if opts.Delay > 0 {
		o = append(o, Delay(opts.Delay))
	}
	if opts.UniqueKey != "" {
		o = append(o, UniqueKey(opts.UniqueKey))
	}
	raw := json.RawMessage(payload)
	if opts.Tx == nil {
		_, err := p.Enqueue(ctx, kind, raw, o...)
		return err
	}
	tx, ok := opts.Tx.(pgx.Tx)
	if !ok {
		return fmt.Errorf("queue: JobOptions.Tx is a %T, not a pgx.Tx", opts.Tx)
	}
	_, err := p.EnqueueTx(ctx, tx, kind, raw, o...)
	return err
}

// deadCountLimit caps how many dead jobs CountDeadJobs looks at.
const deadCountLimit = 1000

// deadCounter is a backend that counts dead jobs where they are stored,
// without sending them to the process: a dead job keeps its payload (a mail's
// attachments make it megabytes of JSON), and a count that listed the dead
// letter would read and decode them all, the decoding deaf to its context.
type deadCounter interface {
	// CountDead counts the jobs of kind among the newest limit dead jobs of
	// the configured queues (the ones Dead would list).
	CountDead(ctx context.Context, kind string, limit int) (int, error)
}

// CountDeadJobs counts the dead jobs of kind among the newest 1000 dead jobs
// of the configured queues together (so a count of 1000 means "at least").
// The mail plugin reports it on /ready through a one-method interface. The
// postgres backend counts in the database; the others list the dead letter.
//
// While the queue's breaker is open it answers at once with the breaker's
// error, without asking the broker: the broker is known not to answer.
func (p *Plugin) CountDeadJobs(ctx context.Context, kind string) (int, error) {
	if s := p.breaker.Snapshot(); s.State == resilience.StateOpen {
		return 0, p.depErr("count dead jobs", fmt.Errorf("enqueues are suspended for %.1fs: %w", s.RetryAfter.Seconds(), resilience.ErrOpen))
	}
	if dc, ok := p.backend.(deadCounter); ok {
		n, err := dc.CountDead(ctx, kind, deadCountLimit)
		return n, p.depErr("count dead jobs", err)
	}
	jobs, err := p.DeadJobs(ctx, DeadQuery{Limit: deadCountLimit})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range jobs {
		if j.Kind == kind {
			n++
		}
	}
	return n, nil
}

var _ framework.Jobs = (*Plugin)(nil)
