package channels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/requestid"
)

// pluginName is the plugin's key in [plugins] enabled, its [plugin.channels]
// table, and the dependency its errors name.
const pluginName = "channels"

// Plugin is the channels plugin: events across replicas over the cache
// plugin's Redis. Make it with [New]; handlers get it with [From].
type Plugin struct {
	cfg Config

	// Set by Start, read-only afterwards.
	chans      map[string]*channel // by name: every declared channel
	client     redis.UniversalClient
	breaker    *resilience.Breaker
	cmdTimeout time.Duration
	clock      resilience.Clock // the App's: the subscriptions' states and their boot grace
	log        *slog.Logger
	prop       framework.MessagePropagator
	metrics    *metrics
	streams    *streamLimits // sse_max_streams, sse_max_streams_per_client
	consumer   string
	draining   <-chan struct{}

	// ctx lives from Start to Stop: loops and SSE tails end with it.
	ctx    context.Context
	cancel context.CancelFunc
	// handlerCtx is the parent of every handler's context; Stop cancels it
	// when its own context ends, so handlers get the shutdown budget.
	handlerCtx    context.Context
	cancelHandler context.CancelFunc
	loops         sync.WaitGroup // subscription loops and handler workers
	handlers      sync.WaitGroup // handler runs in flight

	mu      sync.Mutex
	started bool
	stopped bool
	pending []pendingSub // subscriptions made before Start
	bcast   *broadcaster // nil until a broadcast channel is subscribed
}

// channel is one declared channel.
type channel struct {
	name string
	mode mode
	key  string // the pub/sub channel or stream key
	dead string // the dead letter stream key (durable)
	pub  *publishCounters

	mu      sync.Mutex
	handler Handler // nil until Subscribe
	queue   chan Message
	hub     *hub  // nil until an SSE stream is made for it
	loop    *loop // the durable consumer loop
}

type pendingSub struct {
	channel string
	handler Handler
}

// Handler handles one message. For a durable channel, returning nil
// acknowledges the message; an error leaves it to be delivered again after
// visibility_timeout (to this replica or another), and after max_deliveries
// deliveries it goes to the dead letter stream. An error that wraps a
// framework.PermanentError (framework.Permanent) sends it to the dead letter
// at once. For a broadcast channel the error is logged.
//
// The context ends after handler_timeout, carries the publisher's request ID
// and continues the publishing request's trace; [MessageFrom] returns the
// message from it. A panic is recovered and counts as an error.
type Handler func(ctx context.Context, m Message) error

// New returns the channels plugin with its defaults.
func New() *Plugin { return &Plugin{cfg: defaultConfig()} }

// From returns the channels plugin of app, or an error naming the fix when it
// is not enabled. Call it at boot, in Routes.
func From(app *framework.App) (*Plugin, error) {
	return framework.Get[*Plugin](app, pluginName)
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return pluginName }

// Config implements framework.Configurable.
func (p *Plugin) Config() any {
	p.cfg = defaultConfig()
	return &p.cfg
}

// Dependencies implements framework.Dependent: channels run on the cache
// plugin's Redis client.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "cache"}}
}

// Start implements framework.Starter. It connects nothing: subscriptions
// connect in the background and keep trying while Redis is down, so an
// outage never fails the boot.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	rp, err := framework.Get[framework.Redis](app, "cache")
	if err != nil {
		return fmt.Errorf(`channels: events travel over the cache plugin's Redis (cache.New() in the service's plugins, with [plugin.cache] url): %w`, err)
	}
	if rp.Client() == nil {
		return errors.New("channels: the cache plugin has no client; it must start before the channels plugin")
	}
	p.client, p.breaker, p.cmdTimeout = rp.Client(), rp.Breaker(), rp.CommandTimeout()
	p.clock = app.Clock()
	p.log = app.Logger().With(slog.String("plugin", pluginName))
	p.prop = framework.MessagePropagatorOf(app)
	p.draining = app.Draining()
	host, _ := os.Hostname()
	p.consumer = host + "-" + strconv.Itoa(os.Getpid()) + "-" + requestid.New()[:8]

	p.chans = make(map[string]*channel, len(p.cfg.Broadcast)+len(p.cfg.Durable))
	for _, name := range p.cfg.Broadcast {
		p.chans[name] = &channel{name: name, mode: modeBroadcast, key: p.cfg.KeyPrefix + name}
	}
	for _, name := range p.cfg.Durable {
		p.chans[name] = &channel{name: name, mode: modeDurable, key: p.cfg.KeyPrefix + name, dead: p.cfg.KeyPrefix + name + ":dead"}
	}
	m, err := newMetrics(p)
	if err != nil {
		return err
	}
	if err := m.register(app.Metrics()); err != nil {
		return fmt.Errorf("channels: register metrics: %w", err)
	}
	p.metrics = m
	p.streams = newStreamLimits(p.cfg.SSEMaxStreams, p.cfg.SSEMaxStreamsPerClient)

	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.handlerCtx, p.cancelHandler = context.WithCancel(context.Background())
	p.mu.Lock()
	p.started = true
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, s := range pending {
		if err := p.Subscribe(s.channel, s.handler); err != nil {
			p.Stop(context.Background())
			return err
		}
	}
	return nil
}

// Stop implements framework.Stopper: the subscriptions stop taking messages,
// handlers in flight get until ctx ends (then their contexts are cancelled),
// and server-sent events streams end. An unacknowledged durable message is
// delivered again later, to another replica.
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	if !p.started || p.stopped {
		p.stopped = true
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	b := p.bcast
	p.mu.Unlock()

	p.cancel()
	if b != nil {
		b.close()
	}
	for _, c := range p.chans {
		c.mu.Lock()
		if c.hub != nil {
			c.hub.close()
		}
		c.mu.Unlock()
	}
	stop := context.AfterFunc(ctx, p.cancelHandler)
	defer stop()
	done := make(chan struct{})
	go func() {
		p.loops.Wait()
		p.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		p.cancelHandler()
		return nil
	case <-ctx.Done():
		p.cancelHandler()
		// Handlers that ignore their context are abandoned; the loops
		// themselves end within health_check_interval.
		select {
		case <-done:
			return nil
		case <-time.After(p.cfg.HealthCheckInterval + p.cmdTimeout):
			return errors.New("channels: some handlers did not return by the end of the shutdown")
		}
	}
}

// Subscribe registers h for channel, which must be declared in
// [plugin.channels] broadcast or durable. One handler per channel per
// process. Call it at boot (in Routes, or on the plugin before the App
// starts); the subscription connects in the background and reconnects by
// itself after Redis is paused or restarted.
//
// Broadcast: every replica's handler gets every message published while it
// is subscribed, in publish order. Durable: each message goes to one
// replica's handler (at least once), in stream order within that replica.
func (p *Plugin) Subscribe(channelName string, h Handler) error {
	if h == nil {
		return fmt.Errorf("channels: the handler for %q is nil", channelName)
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("channels: subscribe %s after the plugin stopped", channelName)
	}
	if !p.started {
		if p.cfg.modeOf(channelName) == modeUnknown {
			p.mu.Unlock()
			return &UndeclaredError{Channel: channelName}
		}
		p.pending = append(p.pending, pendingSub{channel: channelName, handler: h})
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	c, ok := p.chans[channelName]
	if !ok {
		return &UndeclaredError{Channel: channelName}
	}
	c.mu.Lock()
	if c.handler != nil {
		c.mu.Unlock()
		return fmt.Errorf("channels: a handler for %q is already subscribed", channelName)
	}
	c.handler = h
	c.mu.Unlock()
	switch c.mode {
	case modeBroadcast:
		q := make(chan Message, p.cfg.BroadcastBuffer)
		c.mu.Lock()
		c.queue = q
		c.mu.Unlock()
		if !p.goLoop(func() { p.broadcastWorker(c, q, h) }) {
			return errStopped
		}
		p.broadcast(c)
	case modeDurable:
		l := newLoop("durable "+c.name, p.clock)
		c.mu.Lock()
		c.loop = l
		c.mu.Unlock()
		if !p.goLoop(func() { p.consume(c, l) }) {
			return errStopped
		}
	}
	p.log.Info("channels: subscribed", slog.String("channel", channelName), slog.String("delivery", c.mode.String()))
	return nil
}

// broadcast subscribes the pub/sub connection to c, starting the connection
// on first use.
func (p *Plugin) broadcast(c *channel) {
	p.mu.Lock()
	b := p.bcast
	if b == nil {
		if p.stopped {
			p.mu.Unlock()
			return
		}
		b = newBroadcaster(p)
		b.add(c)
		p.bcast = b
		p.loops.Add(1)
		go func() {
			defer p.loops.Done()
			b.run()
		}()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	b.add(c)
}

var errStopped = errors.New("channels: the plugin has stopped")

// goLoop runs f in a goroutine Stop waits for; false when the plugin has
// stopped (f is not run).
func (p *Plugin) goLoop(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		f()
	}()
	return true
}

var (
	_ framework.LayeredPlugin = (*Plugin)(nil)
	_ framework.Resolver      = (*Plugin)(nil)
)
