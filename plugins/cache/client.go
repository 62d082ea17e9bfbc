package cache

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/jfastframework/jfast/framework"
)

// newClient builds the go-redis client the url describes, with jfast's deadlines.
// It does not connect.
func newClient(cfg Config) (redis.UniversalClient, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, errors.New("url is not a valid URL")
	}
	build, _, err := buildOptions(cfg.URL, u, cfg)
	if err != nil {
		return nil, err
	}
	return build(), nil
}

// urlOverrides returns the query parameters of cfg's url that jfast sets
// itself to another value (see [shared.overrides]); none when the url does
// not parse (parseURL reports that).
func urlOverrides(cfg Config) []urlOverride {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil
	}
	_, over, err := buildOptions(cfg.URL, u, cfg)
	if err != nil {
		return nil
	}
	return over
}

// buildOptions parses the url with go-redis's parser for its mode and returns the
// constructor of the client:
//
//   - a master_name query parameter: Sentinel (redis.ParseFailoverURL), the host
//     and every addr parameter being sentinels;
//   - one or more addr parameters: Redis Cluster (redis.ParseClusterURL), the host
//     and every addr parameter being seed nodes;
//   - otherwise one server (redis.ParseURL).
//
// jfast's keys override what the URL's query says about timeouts and retries,
// so the deadlines cannot be switched off from the URL; the parameters it
// overrides with another value are returned, for Validate to refuse. The
// pool size is pool_size's, which is the URL's pool_size when the key is not
// set (see Plugin.ResolveDefaults). Neither commands nor dials are retried
// (docs/cache.md): a command that failed is the breaker's evidence, and a
// retry would only spend its deadline again.
func buildOptions(raw string, u *url.URL, cfg Config) (func() redis.UniversalClient, []urlOverride, error) {
	q := u.Query()
	disabled := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	switch {
	case q.Has("master_name"):
		return parsed(raw, cfg, redis.ParseFailoverURL, redis.NewFailoverClient, func(o *redis.FailoverOptions) shared {
			return shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
				&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.PoolSize}
		})
	case q.Has("addr"):
		return parsed(raw, cfg, redis.ParseClusterURL, redis.NewClusterClient, func(o *redis.ClusterOptions) shared {
			o.MaintNotificationsConfig = disabled
			return shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
				&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.PoolSize}
		})
	default:
		return parsed(raw, cfg, redis.ParseURL, redis.NewClient, func(o *redis.Options) shared {
			o.MaintNotificationsConfig = disabled
			return shared{&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout,
				&o.ContextTimeoutEnabled, &o.MaxRetries, &o.DialerRetries, &o.PoolSize}
		})
	}
}

// parsed parses raw with go-redis's parser of one mode, writes jfast's
// settings to the fields fields points at (setting there what the mode's
// options need besides), and returns the constructor of the mode's client.
func parsed[O any, C redis.UniversalClient](raw string, cfg Config, parse func(string) (*O, error), newClient func(*O) C, fields func(*O) shared) (func() redis.UniversalClient, []urlOverride, error) {
	o, err := parse(raw)
	if err != nil {
		return nil, nil, parseError(err)
	}
	u, _ := url.Parse(raw) // parse accepted it
	s := fields(o)
	over := s.overrides(u.Query(), cfg)
	s.set(cfg)
	return func() redis.UniversalClient { return newClient(o) }, over, nil
}

// shared points at the fields go-redis's three options types have in common
// and jfast sets whatever the URL said, so the policy is written once.
type shared struct {
	dial, read, write, pool *time.Duration
	contextTimeout          *bool
	retries, dialerRetries  *int
	poolSize                *int
}

// set writes jfast's settings: every wait bounded by command_timeout, the
// caller's context deadline honoured, no command retried and one dial attempt.
func (s shared) set(cfg Config) {
	t := cfg.CommandTimeout
	*s.dial, *s.read, *s.write, *s.pool = t, t, t, t
	*s.contextTimeout = true
	*s.retries = -1
	*s.dialerRetries = 1
	*s.poolSize = cfg.PoolSize
}

// urlOverride is a query parameter of the url that set writes over with
// another value: the URL's cannot be in force.
type urlOverride struct {
	param, value string // as the url has them
	// jfast is what set writes instead, and why, in the words of the error.
	jfast string
	// timeout marks a wait that command_timeout bounds: setting that key is
	// the way to give commands longer.
	timeout bool
}

// overrides returns the parameters of q, in the order set writes them, that
// go-redis parsed into a field set writes to another value. A parameter
// whose value is jfast's (read_timeout equal to command_timeout,
// max_retries=-1) is not one: nothing of it is lost.
func (s shared) overrides(q url.Values, cfg Config) []urlOverride {
	t := cfg.CommandTimeout
	var out []urlOverride
	add := func(param string, differs, timeout bool, jfast string) {
		if q.Has(param) && differs {
			out = append(out, urlOverride{param: param, value: q.Get(param), jfast: jfast, timeout: timeout})
		}
	}
	bound := "command_timeout (" + framework.FormatDuration(t) + "), which bounds every wait of a command"
	add("dial_timeout", *s.dial != t, true, bound)
	add("read_timeout", *s.read != t, true, bound)
	add("write_timeout", *s.write != t, true, bound)
	add("pool_timeout", *s.pool != t, true, bound)
	add("context_timeout_enabled", !*s.contextTimeout, false, "true (the caller's context deadline is honoured)")
	add("max_retries", *s.retries != -1, false, "-1 (every command is sent once: a failed command is the breaker's evidence, and a retry would spend its deadline again)")
	add("dialer_retries", *s.dialerRetries != 1, false, "1 (one dial per connection, within command_timeout)")
	return out
}

// parseError returns go-redis's parse error without any part of the URL that a
// *url.Error would repeat (it carries the password).
func parseError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("is not a URL go-redis accepts: %v", err)
}
