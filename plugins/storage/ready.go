package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// probe runs d's /ready probe (a HEAD of the bucket, a read of the root) and
// waits for it until framework.CheckPart's deadline, not after. The check must answer
// before the readiness aggregator's deadline, which is the check's own: a probe
// bounded by that deadline alone ends with it, and the aggregator, which
// stops waiting at the same instant, reports the whole check as "no answer
// within readiness_timeout" — no disk named, no cause, and the disks that did
// answer lost with it. The probe runs on a goroutine of its own because its
// context is not enough to bound the wait: a stat of a hung network root does
// not look at it, and the SDK notices a cancelled request when the transport
// does.
func probe(ctx context.Context, d *Disk) error {
	start := time.Now()
	pctx, cancel := framework.CheckPart(ctx)
	done := make(chan error, 1)
	go func() {
		// The probe's context ends at its deadline or when it returns,
		// not when the check does.
		defer cancel()
		done <- d.drv.check(pctx)
	}()
	var err error
	select {
	case err = <-done:
	case <-pctx.Done():
		err = pctx.Err()
	}
	if err == nil {
		return nil
	}
	// A probe that ended with its own deadline, by returning its context's
	// error or by not returning at all, is reported as what it is: no answer
	// in time. The SDK's text for it names neither the bucket nor the time.
	if ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) &&
		(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		dl, _ := pctx.Deadline()
		return fmt.Errorf("no answer to the %s within %s (a share of app.readiness_timeout)", probeName(d), dl.Sub(start).Round(time.Millisecond))
	}
	return err
}

// probeName says what the probe of d is, for the check's detail.
func probeName(d *Disk) string {
	if s, ok := d.drv.(*s3Driver); ok {
		return fmt.Sprintf("HEAD of bucket %q", s.bucket)
	}
	return "read of the root"
}
