package resilience

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy defaults every plugin that calls out shares (docs/resilience.md,
// "The policy keys"). A plugin whose dependency answers on another scale
// (a model provider, a gRPC lookup) changes the backoff in its own
// [PolicyConfig] defaults, with its reason beside it.
// The first wait's ceiling is DefaultBackoffBase (100 ms, doubling).
const (
	// DefaultAttempts is one try and at most two retries: enough to ride
	// over a dropped connection or one replica's restart, while a dependency
	// that is down costs at most three times its traffic (less: the retry
	// budget).
	DefaultAttempts = 3
	// DefaultTimeout bounds a whole call between services: every attempt
	// and every wait.
	DefaultTimeout = 10 * time.Second
	// DefaultPolicyBackoffMax caps one wait at a fifth of a 10 s deadline: a
	// longer wait would rarely leave the retry time to finish. (A bare
	// [Backoff] caps at DefaultBackoffMax.)
	DefaultPolicyBackoffMax = 2 * time.Second
)

// The choices of the string-valued policy keys.
const (
	// BudgetWindow is retry_budget = "window": retries stay below
	// retry_budget_ratio of the calls of the last 10 s, plus
	// retry_budget_min_per_second.
	BudgetWindow = "window"
	// BudgetBucket is retry_budget = "bucket": a token bucket
	// (retry_budget_max_tokens, retry_budget_tokens_per_call), one token per
	// retry.
	BudgetBucket = "bucket"
	// JitterNameFull is backoff_jitter = "full": each wait uniform in
	// [0, backoff_base × 2^(n−1)].
	JitterNameFull = "full"
	// JitterNameProportional is backoff_jitter = "proportional": each wait
	// within ±20 % of backoff_base × 2^(n−1).
	JitterNameProportional = "proportional"
)

// PolicyConfig is the keys of the outbound policy every plugin that calls
// out offers: backoff, retry budget, bulkhead and breaker, with one set of
// defaults, one validation and one wording. A plugin embeds it with
// `koanf:",squash"`, so the keys sit in the plugin's own table (an
// upstream, a provider):
//
//	type Upstream struct {
//		BaseURL string `koanf:"base_url"`
//		resilience.PolicyConfig `koanf:",squash"`
//	}
//
// [NewPolicy] turns it into the [Policy] the plugin's calls go through.
type PolicyConfig struct {
	// Attempts is how many tries one call may make, the first included
	// (attempts = 1 never retries), within the rules of the plugin's page
	// (what is retried) and of the loop (deadline and budget).
	// Defaults to 3.
	Attempts int `koanf:"attempts"`
	// Timeout bounds the whole call: every attempt and every wait between
	// attempts. The caller's context deadline, when sooner, wins.
	// Defaults to 10s.
	Timeout time.Duration `koanf:"timeout"`
	// BackoffBase is the ceiling of the first wait; with full jitter the n-th
	// wait is uniform in [0, backoff_base × 2^(n−1)], capped at backoff_max
	// (backoff_jitter = "proportional": that ceiling ±20 %).
	// Defaults to 100ms.
	BackoffBase time.Duration `koanf:"backoff_base"`
	// BackoffMax caps every backoff ceiling. Defaults to 2s.
	BackoffMax time.Duration `koanf:"backoff_max"`
	// BackoffJitter spreads the waits: "full" draws each uniformly in
	// [0, backoff_base × 2^(n−1)], "proportional" within ±20 % of it.
	// Defaults to "full".
	BackoffJitter string `koanf:"backoff_jitter"`
	// RetryBudget chooses the retry budget: "window" (the sliding ratio
	// below) or "bucket" (a token bucket). Defaults to "window".
	RetryBudget string `koanf:"retry_budget"`
	// RetryBudgetRatio ("window") lets a retry start while the retries of the
	// last 10 s stay below this share of the calls of the last 10 s. Must be
	// in (0, 1]. Defaults to 0.2.
	RetryBudgetRatio float64 `koanf:"retry_budget_ratio"`
	// RetryBudgetMinPerSecond ("window") lets a retry start, whatever the
	// ratio says, while fewer retries than this were made in the last second,
	// so a quiet client can still retry. Defaults to 1.
	RetryBudgetMinPerSecond float64 `koanf:"retry_budget_min_per_second"`
	// RetryBudgetMaxTokens ("bucket") is the bucket's size, and what a new
	// bucket starts with; a retry takes one token. Defaults to 10.
	RetryBudgetMaxTokens float64 `koanf:"retry_budget_max_tokens"`
	// RetryBudgetTokensPerCall ("bucket") is what every call adds to the
	// bucket. Defaults to 0.1.
	RetryBudgetTokensPerCall float64 `koanf:"retry_budget_tokens_per_call"`
	// MaxConcurrent is how many calls to the dependency may be in flight
	// from this process. Defaults to 50.
	MaxConcurrent int `koanf:"max_concurrent"`
	// BulkheadWait is the longest a call waits for a place among
	// max_concurrent before it is refused. Defaults to 500ms.
	BulkheadWait time.Duration `koanf:"bulkhead_wait"`
	// Throttle turns on the adaptive throttle: while the dependency refuses
	// for load (429, 503, RESOURCE_EXHAUSTED) or times out, calls and retries
	// are refused locally with probability
	// max(0, (requests − throttle_k × accepts) / (requests + 1)) over the
	// last throttle_window, at most 0.9, before the breaker and the retry
	// budget are asked. Defaults to false.
	Throttle bool `koanf:"throttle"`
	// ThrottleK is the throttle's multiplier: the dependency receives about
	// throttle_k times what it accepts. Must be at least 1. Defaults to 2.
	ThrottleK float64 `koanf:"throttle_k"`
	// ThrottleWindow is the span the throttle counts requests and accepts
	// over. Defaults to 2m.
	ThrottleWindow time.Duration `koanf:"throttle_window"`
	// HedgeAfter turns on hedging for the calls the plugin knows are safe
	// to send twice (idempotent): when an attempt has not answered after
	// this fixed delay ("20ms") or this percentile of the dependency's
	// recent latencies ("p95"), another starts beside it, and the first
	// answer wins. Hedges count in attempts, need the retry budget, and run
	// within timeout. Defaults to "" (no hedging).
	HedgeAfter string `koanf:"hedge_after"`
	// MaxHedges is how many hedges one call may start, each hedge_after
	// after the last; at most attempts − 1 (a hedge is an attempt), or 1.
	// Defaults to 1.
	MaxHedges int `koanf:"max_hedges"`

	// BreakerConfig is the breaker_* keys of the dependency's breaker,
	// which counts each call's final outcome.
	BreakerConfig `koanf:",squash"`
}

// DefaultPolicyConfig returns the policy keys at their defaults.
func DefaultPolicyConfig() PolicyConfig {
	return PolicyConfig{
		Attempts:                 DefaultAttempts,
		Timeout:                  DefaultTimeout,
		BackoffBase:              DefaultBackoffBase,
		BackoffMax:               DefaultPolicyBackoffMax,
		BackoffJitter:            JitterNameFull,
		RetryBudget:              BudgetWindow,
		RetryBudgetRatio:         DefaultBudgetRatio,
		RetryBudgetMinPerSecond:  DefaultBudgetMinPerSecond,
		RetryBudgetMaxTokens:     DefaultTokenBucketMaxTokens,
		RetryBudgetTokensPerCall: DefaultTokenBucketTokensPerCall,
		MaxConcurrent:            DefaultBulkheadMaxConcurrent,
		BulkheadWait:             DefaultBulkheadWait,
		ThrottleK:                DefaultThrottleK,
		ThrottleWindow:           DefaultThrottleWindow,
		MaxHedges:                DefaultMaxHedges,
		BreakerConfig:            DefaultBreakerConfig(),
	}
}

// FillZero sets every zero field to the matching field of d: a client made
// in code (NewClient) or a table of many entries fills what it left unset
// from the plugin's defaults.
func (c *PolicyConfig) FillZero(d PolicyConfig) {
	c.Attempts = cmp.Or(c.Attempts, d.Attempts)
	c.Timeout = cmp.Or(c.Timeout, d.Timeout)
	c.BackoffBase = cmp.Or(c.BackoffBase, d.BackoffBase)
	c.BackoffMax = cmp.Or(c.BackoffMax, d.BackoffMax)
	c.BackoffJitter = cmp.Or(c.BackoffJitter, d.BackoffJitter)
	c.RetryBudget = cmp.Or(c.RetryBudget, d.RetryBudget)
	c.RetryBudgetRatio = cmp.Or(c.RetryBudgetRatio, d.RetryBudgetRatio)
	c.RetryBudgetMinPerSecond = cmp.Or(c.RetryBudgetMinPerSecond, d.RetryBudgetMinPerSecond)
	c.RetryBudgetMaxTokens = cmp.Or(c.RetryBudgetMaxTokens, d.RetryBudgetMaxTokens)
	c.RetryBudgetTokensPerCall = cmp.Or(c.RetryBudgetTokensPerCall, d.RetryBudgetTokensPerCall)
	c.MaxConcurrent = cmp.Or(c.MaxConcurrent, d.MaxConcurrent)
	c.BulkheadWait = cmp.Or(c.BulkheadWait, d.BulkheadWait)
	c.Throttle = cmp.Or(c.Throttle, d.Throttle)
	c.ThrottleK = cmp.Or(c.ThrottleK, d.ThrottleK)
	c.ThrottleWindow = cmp.Or(c.ThrottleWindow, d.ThrottleWindow)
	c.HedgeAfter = cmp.Or(c.HedgeAfter, d.HedgeAfter)
	c.MaxHedges = cmp.Or(c.MaxHedges, d.MaxHedges)
	c.BreakerConfig.FillZero(d.BreakerConfig)
}

// Validate reports every policy key out of range, with the same wording in
// every plugin; v's keys are relative to the table that embeds the config.
func (c PolicyConfig) Validate(v Validator) {
	c.validate(v)
	if _, _, err := ParseHedgeAfter(c.HedgeAfter); err != nil {
		v.Error("hedge_after", err.Error(), `set a delay such as "20ms", a percentile of the dependency's latency such as "p95", or leave it out`)
	}
	v.Positive("max_hedges", c.MaxHedges)
	if n := c.MaxHedges; n > DefaultMaxHedges && c.Attempts >= 1 && n > c.Attempts-1 {
		fix := fmt.Sprintf("set max_hedges ≤ %d or raise attempts to %d", c.Attempts-1, n+1)
		if c.Attempts == 1 {
			fix = fmt.Sprintf("leave max_hedges out (with attempts = 1 no call is hedged) or raise attempts to %d", n+1)
		}
		v.Error("max_hedges", fmt.Sprintf("must not be above attempts − 1 (%d): a hedge is an attempt, so a call never starts more, got %d",
			c.Attempts-1, n), fix)
	}
}

// ValidateUnhedged is Validate for a dependency whose calls are never
// hedged: hedge_after and max_hedges, when set, are refused with why and
// fix, and nothing else is said of them (a hedge_after = "p100" gets the
// refusal alone, not also the advice to write a valid one). A plugin that
// embeds the policy keys but has no call it may send twice refuses them
// rather than ignore them. A key is set when its value is not the default,
// or, when v can say what the file or the environment set (an IsSet(key
// string) bool method with keys relative to the table, as
// framework.Validation has), when it was set at all: a max_hedges = 1 or a
// hedge_after = "" equals the default, and would pass and read as if the
// key did something.
func (c PolicyConfig) ValidateUnhedged(v Validator, why, fix string) {
	c.validate(v)
	isSet := func(string) bool { return false }
	if ks, ok := v.(interface{ IsSet(key string) bool }); ok {
		isSet = ks.IsSet
	}
	if c.HedgeAfter != "" || isSet("hedge_after") {
		v.Error("hedge_after", why, fix)
	}
	if c.MaxHedges != DefaultMaxHedges || isSet("max_hedges") {
		v.Error("max_hedges", why, "remove it")
	}
}

// validate reports the keys Validate and ValidateUnhedged check alike.
func (c PolicyConfig) validate(v Validator) {
	oneOf := func(key, got string, choices ...string) {
		if slices.Contains(choices, got) {
			return
		}
		q := make([]string, len(choices))
		for i, s := range choices {
			q[i] = strconv.Quote(s)
		}
		v.Error(key, fmt.Sprintf("must be %s, got %q", strings.Join(q, " or "), got),
			fmt.Sprintf("set %q (the default) or %q", choices[0], choices[1]))
	}
	if c.Attempts < 1 {
		v.Error("attempts", fmt.Sprintf("must be at least 1 (the first try counts), got %d", c.Attempts),
			"set 1 to never retry, or a small number such as 3")
	}
	v.Deadline("timeout", c.Timeout)
	Span(v, "backoff_base", c.BackoffBase, "100ms")
	Span(v, "backoff_max", c.BackoffMax, "2s")
	if c.BackoffBase > 0 && c.BackoffMax > 0 && c.BackoffMax < c.BackoffBase {
		v.Error("backoff_max", fmt.Sprintf("must not be below backoff_base (%s), got %s", c.BackoffBase, c.BackoffMax),
			"raise backoff_max or lower backoff_base")
	}
	oneOf("backoff_jitter", c.BackoffJitter, JitterNameFull, JitterNameProportional)
	oneOf("retry_budget", c.RetryBudget, BudgetWindow, BudgetBucket)
	if r := c.RetryBudgetRatio; !(r > 0 && r <= 1) {
		v.Error("retry_budget_ratio", fmt.Sprintf("must be in (0, 1], got %v", r), "set a fraction such as 0.2; it cannot be switched off")
	}
	if r := c.RetryBudgetMinPerSecond; !(r > 0) || math.IsInf(r, 0) {
		v.Error("retry_budget_min_per_second", fmt.Sprintf("must be greater than zero, got %v", r), "set a rate such as 1")
	}
	if n := c.RetryBudgetMaxTokens; !(n >= 1) || math.IsInf(n, 0) {
		v.Error("retry_budget_max_tokens", fmt.Sprintf("must be at least 1 (a retry takes one token), got %v", n), "set a size such as 10")
	}
	if n := c.RetryBudgetTokensPerCall; !(n > 0 && n <= 1) {
		v.Error("retry_budget_tokens_per_call", fmt.Sprintf("must be in (0, 1], got %v", n),
			"set a share of a token such as 0.1 (one retry earned per ten calls)")
	}
	v.Positive("max_concurrent", c.MaxConcurrent)
	Span(v, "bulkhead_wait", c.BulkheadWait, "500ms")
	if k := c.ThrottleK; !(k >= 1) || math.IsInf(k, 0) {
		v.Error("throttle_k", fmt.Sprintf("must be at least 1, got %v", k),
			"set a multiplier such as 2 (the dependency receives about twice what it accepts)")
	}
	Span(v, "throttle_window", c.ThrottleWindow, "2m")
	c.BreakerConfig.Validate(v)
}

// Backoff returns the backoff these keys describe.
func (c PolicyConfig) Backoff() Backoff {
	j := JitterFull
	if c.BackoffJitter == JitterNameProportional {
		j = JitterProportional
	}
	return Backoff{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: j}
}

// BudgetOpts returns the options of a retry budget named name, of the kind
// retry_budget chooses.
func (c PolicyConfig) BudgetOpts(name string, clock Clock) RetryBudgetOpts {
	if c.RetryBudget == BudgetBucket {
		return RetryBudgetOpts{Name: name, Clock: clock, TokenBucket: &TokenBucketOpts{
			MaxTokens: c.RetryBudgetMaxTokens, TokensPerCall: c.RetryBudgetTokensPerCall,
		}}
	}
	return RetryBudgetOpts{Name: name, Ratio: c.RetryBudgetRatio, MinPerSecond: c.RetryBudgetMinPerSecond, Clock: clock}
}

// BulkheadOpts returns the options of a bulkhead named name.
func (c PolicyConfig) BulkheadOpts(name string, clock Clock) BulkheadOpts {
	return BulkheadOpts{Name: name, MaxConcurrent: c.MaxConcurrent, Wait: c.BulkheadWait, Clock: clock}
}

// ThrottleOpts returns the options of the throttle named name, or nil when
// throttle is off.
func (c PolicyConfig) ThrottleOpts(name string, clock Clock, rnd func() float64) *ThrottleOpts {
	if !c.Throttle {
		return nil
	}
	return &ThrottleOpts{Name: name, K: c.ThrottleK, Window: c.ThrottleWindow, Clock: clock, Rand: rnd}
}

// PolicyKeys returns the names of the policy keys, breaker_* included, in
// the order of [PolicyConfig]'s fields: for a plugin that refuses them in a
// table where they do not apply (a local disk).
func PolicyKeys() []string {
	return slices.Clone(policyKeys)
}

var policyKeys = tagKeys(reflect.TypeFor[PolicyConfig]())

// tagKeys returns the koanf keys of t's fields, descending into squashed
// structs.
func tagKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		tag := f.Tag.Get("koanf")
		if tag == ",squash" {
			keys = append(keys, tagKeys(f.Type)...)
			continue
		}
		keys = append(keys, tag)
	}
	return keys
}
