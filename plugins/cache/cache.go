package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"runtime/debug"
	"time"

	"github.com/redis/go-redis/v9"
)

// Get returns the value stored under key (key_prefix is added), and false when
// there is none. When Redis does not answer the error is an [*UnavailableError].
func (p *Plugin) Get(ctx context.Context, key string) ([]byte, bool, error) {
	b, err := p.client.Get(ctx, p.prefix+key).Bytes()
	switch {
	case err == nil:
		return b, true, nil
	case err == redis.Nil:
		return nil, false, nil
	}
	return nil, false, err
}

// Set stores value under key for ttl. A ttl that is not positive is refused: an
// entry without expiry is not a cache entry.
func (p *Plugin) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("cache: set %q: ttl must be positive, got %s", key, ttl)
	}
	return p.client.Set(ctx, p.prefix+key, value, ttl).Err()
}

// Delete removes keys; keys that do not exist are not an error.
func (p *Plugin) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = p.prefix + k
	}
	return p.client.Del(ctx, full...).Err()
}

// TTL returns how long key has left, and false when it does not exist (or has no
// expiry).
func (p *Plugin) TTL(ctx context.Context, key string) (time.Duration, bool, error) {
	d, err := p.client.PTTL(ctx, p.prefix+key).Result()
	if err != nil {
		return 0, false, err
	}
	if d < 0 {
		return 0, false, nil
	}
	return d, true, nil
}

// GetJSON returns the JSON value stored under key decoded as a T, and false when
// there is none.
func GetJSON[T any](ctx context.Context, p *Plugin, key string) (T, bool, error) {
	var v T
	b, ok, err := p.Get(ctx, key)
	if err != nil || !ok {
		return v, false, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, fmt.Errorf("cache: decode %q as %T: %w", key, v, err)
	}
	return v, true, nil
}

// SetJSON stores v encoded as JSON under key for ttl.
func SetJSON[T any](ctx context.Context, p *Plugin, key string, v T, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("cache: encode %q: %w", key, err)
	}
	return p.Set(ctx, key, b, ttl)
}

// Remember returns the value under key, or computes it with fn, stores it for ttl
// and returns it. Concurrent callers in this process asking for the same missing
// key wait for one computation (single-flight): a cold key under load costs one
// call to fn, not one per request.
//
// Remember fails open: when Redis does not answer (breaker open, timeout,
// refused) it returns fn's value without caching it, counts it in
// jfast_cache_fail_open_total{component="remember"} and logs it once per breaker
// opening. It never returns an [*UnavailableError]. fn's own error is returned
// as is and nothing is stored.
//
// fn runs with the first caller's context values and deadline, but not its
// cancellation: a caller that gives up stops waiting (with its context's error)
// without failing the others. A panic in fn is re-raised in every waiting
// caller's goroutine (where the recovery middleware answers 500), never in the
// flight's own goroutine, which would end the process.
func (p *Plugin) Remember(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("cache: remember %q: ttl must be positive, got %s", key, ttl)
	}
	return remember(ctx, p, key, "\x00raw", fn,
		func(b []byte) ([]byte, bool) { return b, true },
		func(b []byte) ([]byte, error) { return b, nil }, ttl)
}

// RememberJSON is [Plugin.Remember] for a value stored as JSON. A stored value
// that does not decode as a T is treated as a miss and replaced.
func RememberJSON[T any](ctx context.Context, p *Plugin, key string, ttl time.Duration, fn func(context.Context) (T, error)) (T, error) {
	if ttl <= 0 {
		var zero T
		return zero, fmt.Errorf("cache: remember %q: ttl must be positive, got %s", key, ttl)
	}
	return remember(ctx, p, key, "\x00json:"+reflect.TypeFor[T]().String(), fn,
		func(b []byte) (T, bool) {
			var v T
			if err := json.Unmarshal(b, &v); err != nil {
				p.log.Debug("cache: stored value does not decode; recomputing", slog.String("key", key), slog.String("error", err.Error()))
				return v, false
			}
			return v, true
		},
		func(v T) ([]byte, error) { return json.Marshal(v) }, ttl)
}

// flightResult is what one single-flight computation hands to every waiter.
type flightResult[T any] struct {
	v        T
	err      error
	panicked *fnPanic
}

// fnPanic is a panic of Remember's fn, carried out of the flight to be
// re-raised in each waiting caller's goroutine. Its text holds the panic value
// and the stack where fn panicked.
type fnPanic struct {
	value any
	stack []byte
}

func (p *fnPanic) Error() string {
	return fmt.Sprintf("cache: remember: fn panicked: %v\n\n%s", p.value, p.stack)
}

// kind tells the flights of the same key apart by how the value is decoded
// (Remember's raw bytes, RememberJSON's T): a caller only ever joins a flight
// that yields its own type.
func remember[T any](ctx context.Context, p *Plugin, key, kind string, fn func(context.Context) (T, error),
	decode func([]byte) (T, bool), encode func(T) ([]byte, error), ttl time.Duration) (T, error) {
	// Fast path: a hit needs no flight.
	b, ok, err := p.Get(ctx, key)
	if err == nil && ok {
		if v, ok := decode(b); ok {
			return v, nil
		}
	}
	up := true
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			var zero T
			return zero, err // the caller gave up, or Redis answered with an error reply
		}
		// Fail open, and do not ask Redis again in the flight: one command
		// timeout per call is what an outage may cost, not two.
		up = false
		p.failOpen(componentRemember, err)
	}

	fctx := context.WithoutCancel(ctx)
	var cancel context.CancelFunc = func() {}
	if dl, ok := ctx.Deadline(); ok {
		fctx, cancel = context.WithDeadline(fctx, dl)
	}
	ch := p.flight.DoChan(p.prefix+key+kind, func() (res any, _ error) {
		defer cancel()
		// The flight runs fn in a goroutine of its own, where a panic would
		// end the process (singleflight re-panics it unrecoverably). It is
		// caught here and re-raised in every caller's goroutine instead, so
		// the request's recovery middleware answers 500 as for any panic.
		defer func() {
			if v := recover(); v != nil {
				res = flightResult[T]{panicked: &fnPanic{value: v, stack: debug.Stack()}}
			}
		}()
		return computeAndStore(p, fctx, key, fn, decode, encode, ttl, up), nil
	})
	select {
	case res := <-ch:
		cancel() // a follower's context was never used; the leader's is done
		r, ok := res.Val.(flightResult[T])
		if !ok {
			// Two types whose names read the same (same package name and type
			// name, different packages) met in one flight: compute alone,
			// in this caller's goroutine and context.
			r = computeAndStore(p, ctx, key, fn, decode, encode, ttl, up)
		}
		if r.panicked != nil {
			if r.panicked.value == http.ErrAbortHandler {
				panic(http.ErrAbortHandler)
			}
			panic(r.panicked)
		}
		return r.v, r.err
	case <-ctx.Done():
		// Not cancel: if this caller leads, the flight still serves the others
		// (and releases its context when it ends); a follower's unused context
		// ends at its deadline.
		var zero T
		return zero, ctx.Err()
	}
}

// computeAndStore runs inside the flight: look again (another process may have
// stored it meanwhile), compute, store. A Redis failure at any step fails open;
// up false (the leader's first read failed) skips Redis altogether.
func computeAndStore[T any](p *Plugin, ctx context.Context, key string, fn func(context.Context) (T, error),
	decode func([]byte) (T, bool), encode func(T) ([]byte, error), ttl time.Duration, up bool) flightResult[T] {
	if up {
		b, ok, err := p.Get(ctx, key)
		switch {
		case err == nil && ok:
			if v, ok := decode(b); ok {
				return flightResult[T]{v: v}
			}
		case err != nil && errors.Is(err, ErrUnavailable):
			up = false
			p.failOpen(componentRemember, err)
		case err != nil:
			return flightResult[T]{err: err}
		}
	}
	v, err := fn(ctx)
	if err != nil || !up {
		return flightResult[T]{v: v, err: err}
	}
	enc, err := encode(v)
	if err != nil {
		return flightResult[T]{v: v, err: fmt.Errorf("cache: encode %q: %w", key, err)}
	}
	if err := p.Set(ctx, key, enc, ttl); err != nil {
		if errors.Is(err, ErrUnavailable) {
			p.failOpen(componentRemember, err)
		} else {
			p.log.Warn("cache: could not store a remembered value", slog.String("key", key), slog.String("error", err.Error()))
		}
	}
	return flightResult[T]{v: v}
}
