package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/requestid"
)

type messageKey struct{}

// MessageFrom returns the message a handler's context was made for.
func MessageFrom(ctx context.Context) (Message, bool) {
	m, ok := ctx.Value(messageKey{}).(*Message)
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// SubscribeJSON subscribes fn to channel with the payload decoded from JSON
// into a T. A payload that does not decode is a permanent failure: a durable
// message goes to the dead letter at once. See [Plugin.Subscribe].
func SubscribeJSON[T any](p *Plugin, channel string, fn func(ctx context.Context, v T) error) error {
	if fn == nil {
		return fmt.Errorf("channels: the handler for %q is nil", channel)
	}
	return p.Subscribe(channel, func(ctx context.Context, m Message) error {
		var v T
		if err := json.Unmarshal(m.Payload, &v); err != nil {
			return framework.Permanent(fmt.Errorf("decode %s payload into %T: %w", channel, v, err))
		}
		return fn(ctx, v)
	})
}

// TimeoutError is a handler run that went past handler_timeout.
type TimeoutError struct {
	Channel string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("channels: handler of %s exceeded handler_timeout (%s)", e.Channel, e.Timeout)
}

// Is makes errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// PanicError is a handler run that panicked.
type PanicError struct {
	Channel string
	Value   any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("channels: handler of %s panicked: %v", e.Channel, e.Value)
}

// outcome names how a handler run ended, for metrics and logs.
func outcome(err error) string {
	var pe *PanicError
	var perm *framework.PermanentError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &pe):
		return "panic"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &perm):
		return "permanent"
	}
	return "error"
}

// run runs h for m under handler_timeout, with the publisher's request ID and
// trace, recovering a panic. It returns when h returns or when its deadline
// passes, whichever is first: a handler that ignores its context is left
// running (and counted as timed out) rather than holding the subscription.
func (p *Plugin) run(c *channel, h Handler, m *Message) error {
	start := time.Now()
	ctx := context.WithValue(p.handlerCtx, messageKey{}, m)
	if m.RequestID != "" {
		ctx = requestid.NewContext(ctx, m.RequestID)
	}
	end := func(error) {}
	if p.prop != nil {
		ctx, end = p.prop.ObserveMessage(ctx, c.name, m.metadata)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, p.cfg.HandlerTimeout, &TimeoutError{Channel: c.name, Timeout: p.cfg.HandlerTimeout})
	done := make(chan error, 1)
	p.handlers.Add(1)
	go func() {
		defer p.handlers.Done()
		defer func() {
			if r := recover(); r != nil {
				p.log.ErrorContext(ctx, "channels: handler panicked", slog.String("channel", c.name),
					slog.String("message_id", m.ID), slog.String("panic", fmt.Sprint(r)), slog.String("stack", string(debug.Stack())))
				done <- &PanicError{Channel: c.name, Value: r}
			}
		}()
		done <- h(ctx, *m)
	}()
	var err error
	select {
	case err = <-done:
		if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded) {
			err = context.Cause(ctx)
		}
	case <-ctx.Done():
		err = context.Cause(ctx)
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("channels: handler of %s interrupted by shutdown: %w", c.name, err)
		}
	}
	cancel()
	end(err)
	o := outcome(err)
	p.metrics.handled(c, o, time.Since(start))
	if err != nil && o != "panic" {
		p.log.LogAttrs(ctx, slog.LevelWarn, "channels: handler failed", slog.String("channel", c.name),
			slog.String("message_id", m.ID), slog.Int("delivery", m.Delivery), slog.String("outcome", o), slog.String("error", err.Error()))
	}
	return err
}
