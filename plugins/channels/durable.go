package channels

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Dead letter entries keep the message's fields and add these.
const (
	fieldDeadID         = "dead:id"
	fieldDeadDeliveries = "dead:deliveries"
	fieldDeadError      = "dead:error"
	fieldDeadGroup      = "dead:group"
)

// consume is a durable channel's consumer loop: one consumer (this process)
// of the service's group, reading one message at a time (XREADGROUP COUNT 1
// BLOCK health_check_interval), handling it, acknowledging it, and every
// health_check_interval claiming messages that another consumer left
// unacknowledged for visibility_timeout (XAUTOCLAIM). One message at a time
// keeps every delivered message's idle time under handler_timeout, which
// visibility_timeout exceeds, so a live replica's message is never claimed.
func (p *Plugin) consume(c *channel, l *loop) {
	ctx := p.ctx
	backoff := resilience.Backoff{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	attempt := 0
	groupReady := false
	var lastClaim time.Time
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		if l.setDown(err) {
			p.log.Warn("channels: durable subscription lost; retrying", slog.String("channel", c.name), slog.String("error", l.errText()))
		}
		attempt++
		sleep(ctx, backoff.Delay(attempt))
	}
	for ctx.Err() == nil {
		if !groupReady {
			if err := p.ensureGroup(ctx, c); err != nil {
				fail(err)
				continue
			}
			groupReady = true
		}
		if time.Since(lastClaim) >= p.cfg.HealthCheckInterval {
			if err := p.claim(ctx, c); err != nil {
				if isNoGroup(err) {
					groupReady = false
				}
				fail(err)
				continue
			}
			lastClaim = time.Now()
		}
		streams, err := p.client.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group:    p.cfg.Group,
			Consumer: p.consumer,
			Streams:  []string{c.key, ">"},
			Count:    1,
			Block:    p.cfg.HealthCheckInterval,
		}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			if isNoGroup(err) {
				// Redis lost the group (restarted without persistence,
				// or the stream was deleted): make it again.
				groupReady = false
			}
			fail(err)
			continue
		}
		attempt = 0
		if l.setUp() && l.reconnects() > 0 {
			p.log.Info("channels: durable subscription resumed", slog.String("channel", c.name))
		}
		for _, s := range streams {
			for _, xm := range s.Messages {
				p.deliver(c, xm, 1)
			}
		}
	}
}

// ensureGroup makes the service's consumer group, and the stream when it does
// not exist yet. A new group starts at the oldest entry the stream keeps, so
// what was published before the first subscriber started is delivered too.
func (p *Plugin) ensureGroup(ctx context.Context, c *channel) error {
	err := p.client.XGroupCreateMkStream(ctx, c.key, p.cfg.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return err
	}
	return nil
}

func isNoGroup(err error) bool { return err != nil && strings.Contains(err.Error(), "NOGROUP") }

// claim takes over, one at a time, the messages of c idle for longer than
// visibility_timeout (their consumer died, or its handler failed), and
// handles them; those delivered max_deliveries times already go to the dead
// letter instead.
func (p *Plugin) claim(ctx context.Context, c *channel) error {
	start := "0-0"
	for ctx.Err() == nil {
		msgs, next, err := p.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream:   c.key,
			Group:    p.cfg.Group,
			Consumer: p.consumer,
			MinIdle:  p.cfg.VisibilityTimeout,
			Start:    start,
			Count:    1,
		}).Result()
		if err != nil {
			return err
		}
		for _, xm := range msgs {
			if xm.Values == nil {
				continue // trimmed away while pending; XAUTOCLAIM dropped it
			}
			n, err := p.deliveries(ctx, c, xm.ID)
			if err != nil {
				return err
			}
			if n == 0 {
				continue // acknowledged meanwhile
			}
			p.metrics.claimed(c)
			if n > p.cfg.MaxDeliveries {
				p.deadLetter(c, xm, n, nil)
				continue
			}
			p.deliver(c, xm, n)
		}
		if next == "" || next == "0-0" {
			return nil
		}
		start = next
	}
	return ctx.Err()
}

// deliveries returns how many times id was delivered (XAUTOCLAIM counts its
// own delivery); 0 when it is no longer pending.
func (p *Plugin) deliveries(ctx context.Context, c *channel, id string) (int, error) {
	ps, err := p.client.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: c.key, Group: p.cfg.Group, Start: id, End: id, Count: 1,
	}).Result()
	if err != nil {
		return 0, err
	}
	if len(ps) == 0 {
		return 0, nil
	}
	return int(ps[0].RetryCount), nil
}

// deliver runs c's handler for one message and acknowledges it when the
// handler returned nil; a permanent failure, or a failure of the last allowed
// delivery, sends it to the dead letter.
func (p *Plugin) deliver(c *channel, xm redis.XMessage, delivery int) {
	c.mu.Lock()
	h := c.handler
	c.mu.Unlock()
	m := entryMessage(c.name, xm.ID, xm.Values)
	m.Delivery = delivery
	err := p.run(c, h, &m)
	var perm *framework.PermanentError
	switch {
	case err == nil:
		if aerr := p.client.XAck(context.Background(), c.key, p.cfg.Group, xm.ID).Err(); aerr != nil {
			p.log.Warn("channels: acknowledge failed; the message will be delivered again after visibility_timeout",
				slog.String("channel", c.name), slog.String("message_id", xm.ID), slog.String("error", framework.MaskSecrets(aerr.Error())))
		}
	case errors.As(err, &perm), delivery >= p.cfg.MaxDeliveries:
		p.deadLetter(c, xm, delivery, err)
	}
}

// deadLetter moves a message to the channel's dead letter stream: it is added
// there with why, then acknowledged, in one pipeline. If that fails the
// message stays pending and the next claim tries again.
func (p *Plugin) deadLetter(c *channel, xm redis.XMessage, deliveries int, cause error) {
	vals := make([]any, 0, 2*len(xm.Values)+8)
	for k, v := range xm.Values {
		vals = append(vals, k, v)
	}
	vals = append(vals, fieldDeadID, xm.ID, fieldDeadDeliveries, strconv.Itoa(deliveries), fieldDeadGroup, p.cfg.Group)
	reason := "delivered " + strconv.Itoa(deliveries) + " times without an acknowledgement (max_deliveries " + strconv.Itoa(p.cfg.MaxDeliveries) + ")"
	if cause != nil {
		reason = cause.Error()
	}
	vals = append(vals, fieldDeadError, reason)
	ctx := context.Background()
	_, err := p.client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: c.dead, MaxLen: int64(p.cfg.MaxLen), Approx: true, Values: vals})
		pipe.XAck(ctx, c.key, p.cfg.Group, xm.ID)
		return nil
	})
	if err != nil {
		p.log.Warn("channels: moving a message to the dead letter failed; it stays pending",
			slog.String("channel", c.name), slog.String("message_id", xm.ID), slog.String("error", framework.MaskSecrets(err.Error())))
		return
	}
	p.metrics.dead(c)
	p.log.Error("channels: message moved to the dead letter", slog.String("channel", c.name), slog.String("message_id", xm.ID),
		slog.String("dead_letter", c.dead), slog.Int("deliveries", deliveries), slog.String("reason", reason))
}
