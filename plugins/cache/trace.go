package cache

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
)

// addTraceHook reports every command of the shared client to the App's
// framework.DependencyObserver (the telemetry plugin, when enabled): one span
// per command or pipeline, named by the command ("cache GET", "cache
// pipeline"), never by its keys or values. Without an observer nothing is
// added. It goes first, outside the breaker's hook, so a command the breaker
// refuses shows as a failed span too.
func addTraceHook(app *framework.App, client redis.UniversalClient) {
	if observe := framework.DependencyObserverOf(app); observe != nil {
		client.AddHook(traceHook{observe: observe})
	}
}

type traceHook struct{ observe framework.DependencyObserver }

// DialHook implements redis.Hook.
func (h traceHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h traceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if nested(ctx) { // a new connection's handshake, inside a traced command
			return next(ctx, cmd)
		}
		ctx, end := h.observe(ctx, pluginName, strings.ToUpper(cmd.Name()))
		err := next(ctx, cmd)
		end(traceErr(err))
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h traceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if nested(ctx) {
			return next(ctx, cmds)
		}
		ctx, end := h.observe(ctx, pluginName, "pipeline")
		err := next(ctx, cmds)
		end(traceErr(err))
		return err
	}
}

// traceErr is the error a span records: a missing key (redis.Nil) is an
// answer, not a failure.
func traceErr(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
