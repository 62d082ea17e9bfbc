package resilience

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// BreakerConfig is the five breaker_* keys every plugin with a breaker offers,
// with one set of defaults, one validation and one /ready shape. A plugin
// embeds it in its config struct with `koanf:",squash"`, so the keys sit in the
// plugin's own table:
//
//	type Config struct {
//		URL string `koanf:"url"`
//		resilience.BreakerConfig `koanf:",squash"`
//	}
//
//	[plugin.cache]
//	breaker_failures = 5
//	breaker_cool_down = "15s"
type BreakerConfig struct {
	// BreakerFailures is how many consecutive failures open the breaker.
	// Defaults to 5.
	BreakerFailures int `koanf:"breaker_failures"`
	// BreakerFailureRate opens the breaker when at least this share of the
	// calls of the last breaker_window failed, provided there were at least
	// breaker_minimum_calls. Must be greater than 0 and at most 1.
	// Defaults to 0.5.
	BreakerFailureRate float64 `koanf:"breaker_failure_rate"`
	// BreakerWindow is the sliding span of the failure-rate rule.
	// Defaults to 30s.
	BreakerWindow time.Duration `koanf:"breaker_window"`
	// BreakerMinimumCalls is how many calls breaker_window must hold before
	// the failure-rate rule may open the breaker. Defaults to 20.
	BreakerMinimumCalls int `koanf:"breaker_minimum_calls"`
	// BreakerCoolDown is how long an open breaker answers at once, with no
	// I/O, before it lets one probe call through. Defaults to 15s.
	BreakerCoolDown time.Duration `koanf:"breaker_cool_down"`
}

// DefaultBreakerConfig returns the breaker keys at their defaults.
func DefaultBreakerConfig() BreakerConfig {
	return BreakerConfig{
		BreakerFailures:     DefaultBreakerFailures,
		BreakerFailureRate:  DefaultBreakerFailureRate,
		BreakerWindow:       DefaultBreakerWindow,
		BreakerMinimumCalls: DefaultBreakerMinimumCalls,
		BreakerCoolDown:     DefaultBreakerCoolDown,
	}
}

// FillZero sets every zero field to the matching field of d: a table of many
// entries (upstreams, disks) fills what an entry left unset from the plugin's
// defaults.
func (c *BreakerConfig) FillZero(d BreakerConfig) {
	if c.BreakerFailures == 0 {
		c.BreakerFailures = d.BreakerFailures
	}
	if c.BreakerFailureRate == 0 {
		c.BreakerFailureRate = d.BreakerFailureRate
	}
	if c.BreakerWindow == 0 {
		c.BreakerWindow = d.BreakerWindow
	}
	if c.BreakerMinimumCalls == 0 {
		c.BreakerMinimumCalls = d.BreakerMinimumCalls
	}
	if c.BreakerCoolDown == 0 {
		c.BreakerCoolDown = d.BreakerCoolDown
	}
}

// Validator is what [BreakerConfig.Validate] reports to: framework.Validation
// satisfies it, with keys relative to the table being validated.
type Validator interface {
	Error(key, problem, fix string)
	Positive(key string, n int)
	Deadline(key string, d time.Duration)
}

// Validate reports every breaker key out of range, with the same wording in
// every plugin.
func (c BreakerConfig) Validate(v Validator) {
	v.Positive("breaker_failures", c.BreakerFailures)
	if r := c.BreakerFailureRate; !(r > 0 && r <= 1) {
		v.Error("breaker_failure_rate", fmt.Sprintf("must be in (0, 1]: greater than 0 and at most 1, got %g", r),
			"set a share such as 0.5 (half of the calls in breaker_window)")
	}
	Span(v, "breaker_window", c.BreakerWindow, "30s")
	v.Positive("breaker_minimum_calls", c.BreakerMinimumCalls)
	Span(v, "breaker_cool_down", c.BreakerCoolDown, "15s")
}

// Span reports d unless it is a positive duration: the keys that are spans
// of time but not deadlines (a window, a cool-down, a wait between tries),
// whose fix is not the deadline keys' "cannot be switched off". example is a
// value to suggest, such as "30s".
func Span(v Validator, key string, d time.Duration, example string) {
	if d <= 0 {
		v.Error(key, fmt.Sprintf("must be a positive duration, got %s", d), fmt.Sprintf("set a duration such as %q or a number of seconds", example))
	}
}

// Opts returns the options of a breaker named name built from these keys.
func (c BreakerConfig) Opts(name string, clock Clock, onChange func(StateChange)) BreakerOpts {
	return BreakerOpts{
		Name:          name,
		Failures:      c.BreakerFailures,
		FailureRate:   c.BreakerFailureRate,
		Window:        c.BreakerWindow,
		MinimumCalls:  c.BreakerMinimumCalls,
		CoolDown:      c.BreakerCoolDown,
		Clock:         clock,
		OnStateChange: onChange,
	}
}

// LogStateChanges returns an OnStateChange hook that logs every transition of
// a plugin's breaker in one shape: a warning when it opens (with the
// cool-down), a warning too when a hang made it half-open (hang=true), info
// otherwise. plugin names the plugin ("db", "http"); the
// breaker's own name (the upstream, the disk) is an attribute. next, when not
// nil, is called after the log line (metrics).
func LogStateChanges(logger *slog.Logger, plugin string, coolDown time.Duration, next func(StateChange)) func(StateChange) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(c StateChange) {
		level, msg := slog.LevelInfo, plugin+": breaker "+c.To.String()
		attrs := []slog.Attr{
			slog.String("breaker", c.Name),
			slog.String("from", c.From.String()),
			slog.String("to", c.To.String()),
			slog.Int("consecutive_failures", c.Consecutive),
			slog.Int("window_calls", c.WindowCalls),
			slog.Int("window_failures", c.WindowFailures),
		}
		if c.To == StateOpen {
			level = slog.LevelWarn
			msg = plugin + ": breaker opened: calls to '" + c.Name + "' fail at once for " + coolDown.String()
			attrs = append(attrs, slog.Duration("cool_down", coolDown))
			if c.Hang {
				msg += hangReason(c.From)
				attrs = append(attrs, slog.Bool("hang", true))
			}
		}
		if c.To == StateHalfOpen && c.Hang {
			level = slog.LevelWarn
			msg = plugin + ": breaker half_open: a call to '" + c.Name + "' got no answer within its deadline and nothing answered meanwhile; the next call probes, the others fail at once"
			attrs = append(attrs, slog.Bool("hang", true))
		}
		logger.LogAttrs(context.Background(), level, msg, attrs...)
		if next != nil {
			next(c)
		}
	}
}

// hangReason says why a hang opened the breaker, by the state it left: a
// probe in half-open; in closed state, a call or a liveness check that met
// silence ([Ticket.TripOnSilence], [Breaker.Trip]), no probe involved.
func hangReason(from State) string {
	if from == StateHalfOpen {
		return " (a probe got no answer within its deadline)"
	}
	return " (the dependency answered nothing since the call that hung was sent)"
}

// Suspension says what the breaker does to calls to dep (a dependency as a
// check's detail names it: "'billing'", "model provider 'gpt'"), for a
// check's detail: "calls to 'billing' are suspended for 3.2s" while open,
// "calls to 'billing' are suspended while a probe call is in flight" while
// half-open with its probe taken, "the breaker of calls to 'billing' is
// half-open, waiting for the next call to probe" while half-open with none,
// and "" while closed.
func (s BreakerSnapshot) Suspension(dep string) string {
	switch {
	case s.State == StateOpen:
		return fmt.Sprintf("calls to %s are suspended for %.1fs", dep, s.RetryAfter.Seconds())
	case s.State == StateHalfOpen && s.Probing:
		return "calls to " + dep + " are suspended while a probe call is in flight"
	case s.State == StateHalfOpen:
		return "the breaker of calls to " + dep + " is half-open, waiting for the next call to probe"
	}
	return ""
}

// Meta is a breaker's state in the shape every plugin's /ready uses under
// "breaker": state, retry_after (seconds left of the cool-down, to 0.1 s; 0
// unless open), consecutive_failures, window_calls, window_failures and opens.
func (s BreakerSnapshot) Meta() map[string]any {
	return map[string]any{
		"state":                s.State.String(),
		"retry_after":          math.Round(s.RetryAfter.Seconds()*10) / 10,
		"consecutive_failures": s.Consecutive,
		"window_calls":         s.WindowCalls,
		"window_failures":      s.WindowFailures,
		"opens":                s.Opens,
	}
}
