package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/requestid"
)

// framePool holds the buffers broadcast frames are built in: go-redis has
// written the frame to the socket when Publish returns.
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Publish sends payload on channel, which must be declared in
// [plugin.channels] broadcast or durable:
//
//   - broadcast: PUBLISH; every replica subscribed now gets it, at most once;
//   - durable: XADD to the channel's stream (trimmed to about max_len
//     entries); each service subscribed to it gets it at least once.
//
// Publish is one Redis command on the cache plugin's client, so it is bounded
// by the cache's command_timeout (and ctx) and goes through its breaker: when
// Redis is down it returns an [*UnavailableError] (a 503 naming "channels"),
// at once while the breaker is open. A payload over max_payload_bytes is
// refused before anything is sent ([*PayloadTooLargeError], a 413). The
// request ID and trace context of ctx travel with the message.
func (p *Plugin) Publish(ctx context.Context, channel string, payload []byte) error {
	c, ok := p.chans[channel]
	if !ok {
		return &UndeclaredError{Channel: channel}
	}
	if len(payload) > p.cfg.MaxPayloadBytes {
		c.pub.tooLarge.Inc()
		return &PayloadTooLargeError{Channel: channel, Size: len(payload), Max: p.cfg.MaxPayloadBytes}
	}
	rid := requestid.FromContext(ctx)
	var md map[string]string
	if p.prop != nil {
		md = make(map[string]string, 2)
		p.prop.InjectMessage(ctx, md)
		trimTraceState(md)
	}
	var err error
	start := time.Now()
	if c.mode == modeBroadcast {
		bp := framePool.Get().(*[]byte)
		frame := appendFrame((*bp)[:0], rid, start, md, payload)
		err = p.client.Publish(ctx, c.key, frame).Err()
		if cap(frame) <= 64<<10 {
			*bp = frame[:0]
			framePool.Put(bp)
		}
	} else {
		err = p.client.XAdd(ctx, &redis.XAddArgs{
			Stream: c.key,
			MaxLen: int64(p.cfg.MaxLen),
			Approx: true,
			Values: streamValues(rid, md, payload),
		}).Err()
	}
	if err != nil && errors.Is(err, resilience.ErrOpen) {
		// The cache's breaker refused the command before any I/O (its hook
		// returns the breaker's *resilience.OpenError inside the error):
		// counted as circuit_open, the word every plugin uses for a call
		// its open breaker refused, and not timed, as nothing was sent.
		c.pub.refused.Inc()
		return &UnavailableError{Channel: channel, Err: err}
	}
	c.pub.took.Observe(time.Since(start).Seconds())
	if err != nil {
		c.pub.failed.Inc()
		return &UnavailableError{Channel: channel, Err: err, MaybePublished: maybeSent(err)}
	}
	c.pub.ok.Inc()
	return nil
}

// PublishJSON publishes v encoded as JSON; see [Plugin.Publish].
func (p *Plugin) PublishJSON(ctx context.Context, channel string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("channels: publish %s: encode %T: %w", channel, v, err)
	}
	return p.Publish(ctx, channel, b)
}
