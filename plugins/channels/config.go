package channels

import (
	"fmt"
	"slices"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// Config is the [plugin.channels] table.
type Config struct {
	// KeyPrefix is put in front of every pub/sub channel and stream key, so
	// services can share a Redis: channel "order.paid" is the pub/sub channel
	// or stream "<key_prefix>order.paid". Services that set the same prefix
	// share their channels. Defaults to app.name + ":channels:".
	KeyPrefix string `koanf:"key_prefix"`

	// Group is the consumer group of every durable channel: each service
	// (each group) gets every message once, spread over its replicas.
	// Defaults to app.name.
	Group string `koanf:"group"`

	// Broadcast lists the channels delivered through Redis pub/sub: every
	// subscribed replica gets each message, at most once; nothing is kept
	// for a replica that was away. Defaults to none.
	Broadcast []string `koanf:"broadcast"`

	// Durable lists the channels delivered through a Redis stream and a
	// consumer group: at least once, acknowledged after the handler
	// returns, redelivered after visibility_timeout when a replica dies.
	// Defaults to none.
	Durable []string `koanf:"durable"`

	// MaxPayloadBytes is the largest payload Publish accepts; a larger one
	// is refused before anything is sent. Events name what happened and
	// carry IDs; a document belongs in the database or a bucket.
	// Defaults to 65536 (64 KiB).
	MaxPayloadBytes int `koanf:"max_payload_bytes"`

	// HandlerTimeout bounds every handler run: its context ends after this.
	// Defaults to 10s.
	HandlerTimeout time.Duration `koanf:"handler_timeout"`

	// VisibilityTimeout is how long a durable message may stay delivered and
	// unacknowledged before another replica claims it (XAUTOCLAIM): a
	// replica that died mid-handler costs this much delay. Must be longer
	// than handler_timeout, so a live handler's message is never claimed.
	// Defaults to 30s.
	VisibilityTimeout time.Duration `koanf:"visibility_timeout"`

	// MaxDeliveries is how many times a durable message is handed to a
	// handler before it goes to the channel's dead letter stream
	// ("<key_prefix><channel>:dead"). Defaults to 5.
	MaxDeliveries int `koanf:"max_deliveries"`

	// MaxLen is about how many entries each durable stream (and dead letter
	// stream) keeps: XADD trims older ones (MAXLEN ~). It bounds memory and
	// how far back Last-Event-ID can resume. Defaults to 10000.
	MaxLen int `koanf:"max_len"`

	// HealthCheckInterval is how long a subscription waits in silence
	// before it checks its connection (a PING on the pub/sub connection;
	// the BLOCK of a stream read). A paused or dead Redis is noticed within
	// this plus the cache plugin's command_timeout. Defaults to 2s.
	HealthCheckInterval time.Duration `koanf:"health_check_interval"`

	// BroadcastBuffer is how many broadcast messages may wait for a busy
	// handler, per channel; when it is full further messages are dropped
	// for that handler (counted and logged): broadcast is at most once.
	// Defaults to 1024.
	BroadcastBuffer int `koanf:"broadcast_buffer"`

	// SSEHeartbeat is how often a server-sent events stream with nothing to
	// say sends a comment line, so proxies keep it open and a client that
	// went away is noticed. Defaults to 15s.
	SSEHeartbeat time.Duration `koanf:"sse_heartbeat"`

	// SSEWriteTimeout bounds every write to a server-sent events client; a
	// client that does not take its bytes within it is disconnected.
	// Defaults to 10s.
	SSEWriteTimeout time.Duration `koanf:"sse_write_timeout"`

	// SSEMaxPendingBytes bounds the bytes of events waiting for one
	// server-sent events client. Events are encoded once and shared by
	// every stream, so this is what one stream may hold on to, not a copy:
	// a channel's events waiting in a process take at most about this much
	// memory, however many streams there are, and the pages its streams
	// catching up from a Last-Event-ID hold at once (each their own) at most
	// as much again (catchUpBudget). An event that would take a
	// stream past it disconnects the stream as a slow client (the browser
	// reconnects, and on a durable channel resumes from its
	// Last-Event-ID); one event alone is always queued. Defaults to 8388608
	// (8 MiB).
	SSEMaxPendingBytes int `koanf:"sse_max_pending_bytes"`

	// SSEMaxStreams is how many server-sent events streams the process
	// serves at once, over every channel; past it a request gets 503.
	// Defaults to 10000.
	SSEMaxStreams int `koanf:"sse_max_streams"`

	// SSEMaxStreamsPerClient is how many of them one client may hold (by
	// the address that connected, or SSEOpts.ClientKey); past it a request
	// gets 503. Defaults to 64.
	SSEMaxStreamsPerClient int `koanf:"sse_max_streams_per_client"`

	// SSERetry is the reconnection delay sent to browsers ("retry:").
	// Defaults to 2s.
	SSERetry time.Duration `koanf:"sse_retry"`
}

// Defaults of the keys (docs/channels.md gives the reasons).
const (
	DefaultMaxPayloadBytes        = 64 << 10
	DefaultHandlerTimeout         = 10 * time.Second
	DefaultVisibilityTimeout      = 30 * time.Second
	DefaultMaxDeliveries          = 5
	DefaultMaxLen                 = 10000
	DefaultHealthCheckInterval    = 2 * time.Second
	DefaultBroadcastBuffer        = 1024
	DefaultSSEHeartbeat           = 15 * time.Second
	DefaultSSEWriteTimeout        = 10 * time.Second
	DefaultSSEMaxPendingBytes     = 8 << 20
	DefaultSSEMaxStreams          = 10000
	DefaultSSEMaxStreamsPerClient = 64
	DefaultSSERetry               = 2 * time.Second
)

func defaultConfig() Config {
	return Config{
		MaxPayloadBytes:        DefaultMaxPayloadBytes,
		HandlerTimeout:         DefaultHandlerTimeout,
		VisibilityTimeout:      DefaultVisibilityTimeout,
		MaxDeliveries:          DefaultMaxDeliveries,
		MaxLen:                 DefaultMaxLen,
		HealthCheckInterval:    DefaultHealthCheckInterval,
		BroadcastBuffer:        DefaultBroadcastBuffer,
		SSEHeartbeat:           DefaultSSEHeartbeat,
		SSEWriteTimeout:        DefaultSSEWriteTimeout,
		SSEMaxPendingBytes:     DefaultSSEMaxPendingBytes,
		SSEMaxStreams:          DefaultSSEMaxStreams,
		SSEMaxStreamsPerClient: DefaultSSEMaxStreamsPerClient,
		SSERetry:               DefaultSSERetry,
	}
}

// ResolveDefaults implements framework.Resolver: key_prefix defaults to
// app.name + ":channels:" and group to app.name, where the file and the
// environment leave them unset; the config command says so.
func (p *Plugin) ResolveDefaults(r *framework.Resolution) {
	if !r.IsSet("key_prefix") {
		p.cfg.KeyPrefix = r.App().Name + ":channels:"
		r.Computed("key_prefix", `default: app.name + ":channels:"`)
	}
	if !r.IsSet("group") {
		p.cfg.Group = r.App().Name
		r.Computed("group", "default: app.name")
	}
}

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) {
	c := &p.cfg
	if c.Group == "" {
		v.Error("group", "must not be empty", `set group = "<service name>", or leave it out for app.name`)
	}
	seen := map[string]string{}
	for _, list := range []struct {
		key   string
		names []string
	}{{"broadcast", c.Broadcast}, {"durable", c.Durable}} {
		for _, name := range list.names {
			// A channel's name becomes part of Redis keys; ':' is kept for the
			// plugin's own suffixes (":dead").
			if !framework.ValidDottedName(name) {
				v.Error(list.key, fmt.Sprintf("channel %q must be %s", name, framework.DottedNameRule),
					`name channels like "order.paid"`)
				continue
			}
			if prev, dup := seen[name]; dup {
				if prev == list.key {
					v.Error(list.key, fmt.Sprintf("channel %q is listed twice", name), "list it once")
				} else {
					v.Error(list.key, fmt.Sprintf("channel %q is listed in both broadcast and durable", name),
						"choose one delivery: broadcast (every replica, at most once) or durable (once per service, at least once)")
				}
				continue
			}
			seen[name] = list.key
		}
	}
	v.Positive("max_payload_bytes", c.MaxPayloadBytes)
	v.Deadline("handler_timeout", c.HandlerTimeout)
	v.Deadline("visibility_timeout", c.VisibilityTimeout)
	if c.HandlerTimeout > 0 && c.VisibilityTimeout > 0 && c.VisibilityTimeout <= c.HandlerTimeout {
		v.Error("visibility_timeout", fmt.Sprintf("must be longer than handler_timeout (%s), got %s", framework.FormatDuration(c.HandlerTimeout), framework.FormatDuration(c.VisibilityTimeout)),
			"raise visibility_timeout (or lower handler_timeout): a message still being handled would be claimed by another replica and handled twice")
	}
	v.Positive("max_deliveries", c.MaxDeliveries)
	v.Positive("max_len", c.MaxLen)
	v.Deadline("health_check_interval", c.HealthCheckInterval)
	v.Positive("broadcast_buffer", c.BroadcastBuffer)
	v.Deadline("sse_heartbeat", c.SSEHeartbeat)
	v.Deadline("sse_write_timeout", c.SSEWriteTimeout)
	v.Positive("sse_max_pending_bytes", c.SSEMaxPendingBytes)
	v.Positive("sse_max_streams", c.SSEMaxStreams)
	v.Positive("sse_max_streams_per_client", c.SSEMaxStreamsPerClient)
	if c.SSEMaxStreamsPerClient > c.SSEMaxStreams && c.SSEMaxStreams > 0 {
		v.Error("sse_max_streams_per_client", fmt.Sprintf("must not be more than sse_max_streams (%d), got %d", c.SSEMaxStreams, c.SSEMaxStreamsPerClient),
			"lower sse_max_streams_per_client, or raise sse_max_streams")
	}
	v.Deadline("sse_retry", c.SSERetry)
}

// mode is how a channel is delivered.
type mode uint8

const (
	modeUnknown mode = iota
	modeBroadcast
	modeDurable
)

func (m mode) String() string {
	switch m {
	case modeBroadcast:
		return "broadcast"
	case modeDurable:
		return "durable"
	}
	return "undeclared"
}

// modeOf returns how channel is delivered.
func (c *Config) modeOf(channel string) mode {
	if slices.Contains(c.Durable, channel) {
		return modeDurable
	}
	if slices.Contains(c.Broadcast, channel) {
		return modeBroadcast
	}
	return modeUnknown
}
