package jfasttest

import (
	"context"
	"fmt"
	"sync"

	"github.com/jfastframework/jfast/framework"
)

// Observer is a plugin that stands for the telemetry plugin in tests: it
// records every dependency operation the other plugins report through the
// framework's DependencyObserver seam, as "dependency operation failed=bool".
// Enable it as "telemetry" (its name) next to the plugin under test:
//
//	obs := &jfasttest.Observer{}
//	jfasttest.Start(t, jfasttest.Options{
//		TOML:    "[plugins]\nenabled = [\"db\", \"telemetry\"]\n",
//		Plugins: []framework.Plugin{db.New(), obs},
//	})
//	// ... obs.Operations() == []string{"postgresql query failed=false", ...}
type Observer struct {
	mu  sync.Mutex
	ops []string
}

// Name implements framework.Plugin: "telemetry", the plugin it stands for.
func (o *Observer) Name() string { return "telemetry" }

// DependencyObserver implements framework.DependencyInstrumenter.
func (o *Observer) DependencyObserver() framework.DependencyObserver {
	return func(ctx context.Context, dependency, operation string) (context.Context, func(error)) {
		return ctx, func(err error) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.ops = append(o.ops, fmt.Sprintf("%s %s failed=%v", dependency, operation, err != nil))
		}
	}
}

// Operations returns what was recorded so far, in order.
func (o *Observer) Operations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.ops...)
}

var _ framework.DependencyInstrumenter = (*Observer)(nil)
