package http

import (
	"container/list"
	"context"
	"sync"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Route names the route template of one call ("/payments/{id}", never the
// path with its ids) for an upstream with breaker_key = "route", which keeps
// one breaker per route: two services behind one gateway origin then do not
// share a breaker. Elsewhere it changes nothing. It wins over [WithRoute].
func Route(template string) CallOption { return CallOption{kind: optRoute, value: template} }

// WithRoute names the route template of the calls made under ctx, for code
// that cannot pass a [CallOption]: an SDK's requests through
// [ServiceClient.Transport], a reverse proxy. It is
// framework.ContextWithOutboundRoute, so a plugin that does not import this
// package sets the same value.
func WithRoute(ctx context.Context, template string) context.Context {
	return framework.ContextWithOutboundRoute(ctx, template)
}

// breakerFor returns the breaker of a call to pol's origin on route: the
// origin's, unless breakers are kept per route and the call names one.
func (c *core) breakerFor(pol *policy, route string) *resilience.Breaker {
	if c.routes == nil || route == "" {
		return pol.breaker
	}
	key := pol.origin + " " + route
	if br, ok := c.routes.get(key); ok {
		return br
	}
	name := c.up.Name + " " + route
	if pol.origin != c.origin {
		name = c.up.Name + " " + pol.origin + route // a shared client's: the origin says which
	}
	br := resilience.NewBreaker(c.up.BreakerConfig.Opts(name, c.clock,
		resilience.LogStateChanges(c.logger, "http", c.up.BreakerCoolDown, c.metrics.transitionOnly)))
	return c.routes.add(key, br)
}

// bounded is a map of at most max entries that drops the least recently used
// one to make room, skipping those that are busy (a breaker, budget and
// bulkhead with calls in flight): what it holds is bounded by max plus the
// busy ones. It is safe for concurrent use.
type bounded[V any] struct {
	max  int
	busy func(V) bool // nil: never busy

	mu    sync.Mutex
	items map[string]*list.Element
	order list.List // of *boundedEntry[V], most recently used first
}

type boundedEntry[V any] struct {
	key string
	val V
}

// evictScan is how many of the least recently used entries a full map looks
// at for one that is not busy, so making room costs a bounded time.
const evictScan = 16

func newBounded[V any](max int, busy func(V) bool) *bounded[V] {
	return &bounded[V]{max: max, busy: busy, items: make(map[string]*list.Element)}
}

// get returns key's value and marks it used.
func (b *bounded[V]) get(key string) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.items[key]; ok {
		b.order.MoveToFront(e)
		return e.Value.(*boundedEntry[V]).val, true
	}
	var zero V
	return zero, false
}

// add stores v under key, unless another goroutine stored one first, and
// returns the value stored.
func (b *bounded[V]) add(key string, v V) V {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.items[key]; ok {
		b.order.MoveToFront(e)
		return e.Value.(*boundedEntry[V]).val
	}
	if len(b.items) >= b.max {
		b.evictLocked()
	}
	b.items[key] = b.order.PushFront(&boundedEntry[V]{key: key, val: v})
	return v
}

func (b *bounded[V]) evictLocked() {
	e := b.order.Back()
	for range evictScan {
		if e == nil {
			return
		}
		ent := e.Value.(*boundedEntry[V])
		if b.busy == nil || !b.busy(ent.val) {
			b.order.Remove(e)
			delete(b.items, ent.key)
			return
		}
		e = e.Prev()
	}
}

// len returns how many entries are held.
func (b *bounded[V]) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.items)
}

// each calls f for every entry, most recently used first, under the lock.
func (b *bounded[V]) each(f func(key string, v V)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for e := b.order.Front(); e != nil; e = e.Next() {
		ent := e.Value.(*boundedEntry[V])
		f(ent.key, ent.val)
	}
}
