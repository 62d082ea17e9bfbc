package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/problem"
)

// RateLimitOpts configures a rate limiter made by [Plugin.RateLimit].
type RateLimitOpts struct {
	// Name names the limiter in its Redis keys and in
	// jfast_cache_rate_limited_total. Limiters with the same name share their
	// counts. Defaults to "default". It may not hold a colon.
	Name string

	// Limit is how many requests a key may make per Period. Required.
	Limit int

	// Period is the span Limit is counted over. Required.
	Period time.Duration

	// Burst is how many requests a key may make at once, with nothing used
	// before. Defaults to Limit.
	Burst int

	// Key returns the key a request is counted under; "" lets the request
	// through uncounted. Defaults to [ClientIP].
	Key func(r *http.Request) string
}

// ClientIP returns the host part of r.RemoteAddr: the peer that connected, not
// a forwarded-for header, which a client can write. Behind a proxy, pass a Key
// that reads the header your proxy sets.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// gcra is the whole rate-limit decision, done atomically in Redis: the generic
// cell rate algorithm. The key holds the theoretical arrival time (TAT) in
// microseconds of Redis's own clock (TIME), so replicas of a service with
// skewed clocks agree. Each allowed request moves the TAT one emission interval
// (Period/Limit) later; a request is refused when that would put the TAT more
// than Burst intervals ahead of now.
//
// KEYS[1] the key; ARGV[1] emission interval in µs; ARGV[2] burst.
// Returns {allowed (0/1), remaining, retry_after µs, reset µs}.
var gcra = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - tolerance
if now < allow_at then
  return {0, 0, allow_at - now, tat - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000))
return {1, math.floor((now - allow_at) / interval), 0, new_tat - now}
`)

// RateLimit returns middleware that lets each key make at most opts.Limit
// requests per opts.Period (with bursts up to opts.Burst), decided by one Lua
// script per request in Redis, so every replica shares the counts and
// concurrent requests cannot race.
//
// Allowed requests carry RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset
// and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-06); refused ones
// get a 429 problem+json with Retry-After and the same headers.
//
// When Redis does not answer, requests pass without headers (fail open), counted
// in jfast_cache_fail_open_total{component="ratelimit"}: an outage of the
// limiter's store must not become an outage of the service.
//
// RateLimit panics if Limit or Period is not positive, Burst is negative, or
// Name holds a colon: those are programming errors found at boot.
func (p *Plugin) RateLimit(opts RateLimitOpts) func(http.Handler) http.Handler {
	return p.NewRateLimiter(opts).Middleware
}

// NewRateLimiter returns the limiter behind [Plugin.RateLimit], for code that
// counts something other than HTTP requests (see [RateLimiter.Allow]). It panics
// on the same programming errors.
func (p *Plugin) NewRateLimiter(opts RateLimitOpts) *RateLimiter {
	if opts.Limit <= 0 || opts.Period <= 0 || opts.Burst < 0 {
		panic(fmt.Sprintf("cache: RateLimit needs a positive Limit and Period and a non-negative Burst, got Limit %d, Period %s, Burst %d", opts.Limit, opts.Period, opts.Burst))
	}
	if strings.Contains(opts.Name, ":") {
		// ratelimit:<Name>:<key>: the first colon after ratelimit: ends the
		// name only while names hold none. Otherwise the limiter "a:b" with
		// the key "c" and the limiter "a" with the key "b:c" would count
		// against one bucket.
		panic(fmt.Sprintf("cache: RateLimit Name %q holds a colon, so its Redis keys could be another limiter's: name it without one (%q)",
			opts.Name, strings.ReplaceAll(opts.Name, ":", "-")))
	}
	if opts.Name == "" {
		opts.Name = "default"
	}
	if opts.Burst == 0 {
		opts.Burst = opts.Limit
	}
	if opts.Key == nil {
		opts.Key = ClientIP
	}
	interval := opts.Period.Microseconds() / int64(opts.Limit)
	if interval < 1 {
		interval = 1
	}
	return &RateLimiter{
		p:        p,
		opts:     opts,
		prefix:   p.prefix + "ratelimit:" + opts.Name + ":",
		interval: interval,
		limit:    strconv.Itoa(opts.Burst),
		policy:   policy(opts),
		refused:  p.metrics.limited.WithLabelValues(opts.Name),
	}
}

// RateLimiter is one named rate limit kept in Redis. It is safe for concurrent
// use.
type RateLimiter struct {
	p        *Plugin
	opts     RateLimitOpts
	prefix   string
	interval int64
	limit    string
	policy   string
	refused  interface{ Inc() }
}

// policy is the RateLimit-Policy value: the quota and its window in seconds,
// with the burst when it differs from the quota.
func policy(o RateLimitOpts) string {
	s := strconv.Itoa(o.Limit) + ";w=" + strconv.FormatInt(int64(math.Ceil(o.Period.Seconds())), 10)
	if o.Burst != o.Limit {
		s += ";burst=" + strconv.Itoa(o.Burst)
	}
	return s
}

// Decision is the outcome of one rate-limit check.
type Decision struct {
	// Allowed says whether the request may go on.
	Allowed bool
	// Remaining is how many more requests the key may make right now.
	Remaining int
	// RetryAfter is, when refused, how long until the next request is allowed.
	RetryAfter time.Duration
	// Reset is how long until the key's full burst is available again.
	Reset time.Duration
}

// Allow counts one request for key and says whether it may go on. When Redis does
// not answer the error is an [*UnavailableError]; the caller decides whether to
// fail open (as [RateLimiter.Middleware] does) or closed.
func (l *RateLimiter) Allow(ctx context.Context, key string) (Decision, error) {
	res, err := gcra.Run(ctx, l.p.client, []string{l.prefix + key}, l.interval, l.opts.Burst).Int64Slice()
	if err != nil {
		return Decision{}, err
	}
	if len(res) != 4 {
		return Decision{}, fmt.Errorf("cache: rate limit script returned %d values, want 4", len(res))
	}
	return Decision{
		Allowed:    res[0] == 1,
		Remaining:  int(res[1]),
		RetryAfter: time.Duration(res[2]) * time.Microsecond,
		Reset:      time.Duration(res[3]) * time.Microsecond,
	}, nil
}

// Middleware is the HTTP middleware described at [Plugin.RateLimit].
func (l *RateLimiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := l.opts.Key(r)
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		d, err := l.Allow(r.Context(), key)
		if err != nil {
			if errors.Is(err, ErrUnavailable) {
				l.p.failOpen(componentRateLimit, err)
				next.ServeHTTP(w, r)
				return
			}
			if r.Context().Err() != nil {
				problem.Write(w, r, problem.From(r.Context().Err()))
				return
			}
			// Redis answered with an error reply: a bug or a misconfigured
			// server, not an outage. Fail open too, and say so loudly.
			l.p.log.Error("cache: rate limit script failed; letting the request through", "limiter", l.opts.Name, "error", err.Error())
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("RateLimit-Limit", l.limit)
		h.Set("RateLimit-Remaining", strconv.Itoa(d.Remaining))
		h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.Reset), 10))
		h.Set("RateLimit-Policy", l.policy)
		if d.Allowed {
			next.ServeHTTP(w, r)
			return
		}
		l.refused.Inc()
		retry := time.Duration(ceilSeconds(d.RetryAfter)) * time.Second
		problem.Write(w, r, problem.TooManyRequests(
			fmt.Sprintf("rate limit of %d requests per %s exceeded; retry in %ds", l.opts.Limit, l.opts.Period, int64(retry/time.Second)), retry))
	})
}

// ceilSeconds rounds d up to whole seconds, at least 1 when d is positive.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
