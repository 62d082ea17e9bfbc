package queue

import (
	"context"
	"sync"

	"github.com/jfastframework/jfast/framework"
)

// AddJobObserver is the seam for a span per job attempt (the telemetry
// plugin): f is called before each attempt's handler runs, with the job's
// kind and the metadata its enqueuing side stored (see [Plugin.AddMetadataHooks]),
// and returns the context the handler runs under; the function it returns is
// called once when the attempt ends, with the attempt's final error (nil on
// success; a panic, a timeout and an interruption are errors). Call it from a
// plugin's Start.
func (p *Plugin) AddJobObserver(f framework.JobObserver) {
	p.AddMetadataHooks(nil, func(ctx context.Context, metadata map[string]string) context.Context {
		kind := ""
		if info, ok := ctx.Value(infoKey{}).(*Info); ok {
			kind = info.Kind
		}
		ctx, end := f(ctx, kind, metadata)
		if ends, ok := ctx.Value(attemptEndsKey{}).(*attemptEnds); ok {
			ends.add(end)
		} else {
			end(nil) // not run by Execute: nothing will end it later
		}
		return ctx
	})
}

// attemptEnds collects the end functions of the job observers for one
// attempt; Execute calls them when the attempt ends.
type attemptEnds struct {
	mu   sync.Mutex
	ends []func(error)
}

type attemptEndsKey struct{}

func (a *attemptEnds) add(f func(error)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ends = append(a.ends, f)
}

// end calls every end function, last added first.
func (a *attemptEnds) end(err error) {
	a.mu.Lock()
	ends := a.ends
	a.ends = nil
	a.mu.Unlock()
	for i := len(ends) - 1; i >= 0; i-- {
		ends[i](err)
	}
}
