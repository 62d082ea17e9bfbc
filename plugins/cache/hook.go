package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework/resilience"
)

// hook puts every command of the shared client behind the breaker and its
// deadline. It is a go-redis hook, so it covers the cache API, the rate limiter,
// the token store and every plugin using Client() alike.
//
// Deadlines: the client is built with ContextTimeoutEnabled, so the context's
// deadline reaches the dial and the socket reads and writes, and PoolTimeout is
// command_timeout. The hook gives each command a context whose deadline is
// command_timeout from now (or the caller's, when it is earlier; see
// [cmdContext]):
//
//   - an ordinary command: command_timeout end to end;
//   - a blocking command (BLPOP, BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN,
//     BZPOPMAX, BZMPOP, XREAD/XREADGROUP with BLOCK, WAIT, WAITAOF): its own
//     wait plus command_timeout; with a wait of 0 (block forever) only the
//     caller's context bounds it.
//
// go-redis sets the socket read deadline of its typed blocking commands to the
// wait plus 10 s; the hook's earlier deadline wins. Pub/sub does not go through
// the hook: see docs/cache.md.
//
// Each command the hook sees (not a nested one) is counted once, by outcome,
// in jfast_cache_commands_total, and one the breaker admitted is timed from
// admission to its answer in jfast_cache_command_duration_seconds: one clock
// read more than the deadline needs, a counter and an observation, no
// allocation.
type hook struct {
	timeout time.Duration
	breaker *resilience.Breaker
	metrics *commandMetrics
}

// cmdContext is the context a command runs under: the caller's, with the
// command's deadline when that is sooner, marked as admitted.
//
// It only reports the deadline; it starts no timer. With ContextTimeoutEnabled
// go-redis reads Deadline() for the dial and for every socket read and write, so
// the deadline bounds all the I/O; the wait for a pooled connection is bounded by
// PoolTimeout, which the plugin sets to command_timeout. That keeps the hook to
// one small allocation per command instead of a timer context per command.
//
// The mark matters because go-redis runs a new connection's handshake (HELLO,
// AUTH, SELECT) through the same hooks, nested inside the command that dialed:
// those must neither take the breaker's probe slot (the outer command holds
// it) nor count twice.
type cmdContext struct {
	context.Context
	deadline time.Time // zero: the caller's deadline (or none) applies
}

type cmdContextKey struct{}

// Deadline implements context.Context.
func (c *cmdContext) Deadline() (time.Time, bool) {
	if c.deadline.IsZero() {
		return c.Context.Deadline()
	}
	return c.deadline, true
}

// Value implements context.Context.
func (c *cmdContext) Value(key any) any {
	if key == (cmdContextKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func nested(ctx context.Context) bool { return ctx.Value(cmdContextKey{}) != nil }

// ownDeadline is the plugin's deadline for a command admitted at start and
// allowed limit, on the clock of context deadlines; zero when only the
// caller's context bounds it (a blocking command with a wait of 0).
func ownDeadline(start time.Time, limit time.Duration, bounded bool) time.Time {
	if !bounded {
		return time.Time{}
	}
	return start.Add(limit)
}

// bound returns ctx for a command whose own deadline is own (zero: only the
// caller's deadline).
func bound(ctx context.Context, own time.Time) context.Context {
	c := &cmdContext{Context: ctx}
	if own.IsZero() {
		return c
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(own) {
		return c
	}
	c.deadline = own
	return c
}

// DialHook implements redis.Hook. Dials happen inside a command, which the
// process hooks already bound and count.
func (h *hook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if nested(ctx) {
			return next(ctx, cmd)
		}
		wait, blocking := commandWait(cmd)
		if _, untyped := cmd.(*redis.Cmd); blocking && untyped {
			// Sent through Do: go-redis reads it with command_timeout,
			// whatever its wait (see [untypedBlocking]).
			if err := h.untypedBlocking(cmd, wait); err != nil {
				return err
			}
			blocking = false
		}
		limit, bounded := h.limit(wait, blocking)
		return h.call(ctx, limit, bounded, !blocking, func(ctx context.Context) error { return next(ctx, cmd) })
	}
}

// untypedBlocking refuses, before it is sent, a blocking command sent
// through Do whose wait is 0 (forever) or reaches command_timeout. go-redis
// sets the socket read deadline of its typed blocking methods to their wait
// plus 10 s, but reads every other command with ReadTimeout, which the
// plugin sets to command_timeout: such a command would be cut at
// command_timeout on a healthy Redis, and its cut taken for a hang that
// opens the breaker for every user of the cache. A shorter wait is sent,
// bounded by command_timeout like any command.
func (h *hook) untypedBlocking(cmd redis.Cmder, wait time.Duration) error {
	if wait != 0 && wait < h.timeout {
		return nil
	}
	forever := "0 (forever)"
	if wait != 0 {
		forever = wait.String()
	}
	return fmt.Errorf("cache: %s sent through Do waits %s, but go-redis reads a command sent through Do with command_timeout (%s) and would cut it: use the client's typed method for %s, which reads with the command's wait, or a wait shorter than command_timeout",
		strings.ToUpper(cmd.Name()), forever, h.timeout, strings.ToUpper(cmd.Name()))
}

// ProcessPipelineHook implements redis.Hook: a pipeline (or MULTI/EXEC) is one
// call for the breaker, bounded by command_timeout plus the waits of the
// blocking commands in it. Its *UnavailableError is also each command's
// (see [unavailableCmds]).
func (h *hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if nested(ctx) {
			return next(ctx, cmds)
		}
		var wait time.Duration
		bounded, blocks := true, false
		for _, cmd := range cmds {
			w, blocking := commandWait(cmd)
			if blocking && w == 0 {
				bounded = false
			}
			blocks = blocks || blocking
			wait += w
		}
		ran := false
		err := h.call(ctx, h.timeout+wait, bounded, !blocks, func(ctx context.Context) error {
			ran = true
			return next(ctx, cmds)
		})
		unavailableCmds(cmds, err, ran)
		return err
	}
}

// unavailableCmds gives a pipeline's *UnavailableError (err) to its
// commands, as go-redis gives a single command its hook's error: a caller
// that reads each command's Result, not the pipeline's error, must not
// take a command the breaker refused (which never ran, so go-redis set no
// error on it) for an answer of its zero value, nor get a transport error
// that is not the plugin's. A command Redis answered keeps its answer, its
// error reply and its redis.Nil.
func unavailableCmds(cmds []redis.Cmder, err error, ran bool) {
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		return
	}
	var reply redis.Error
	for _, cmd := range cmds {
		if e := cmd.Err(); e == nil && !ran || e != nil && !errors.As(e, &reply) {
			cmd.SetErr(err)
		}
	}
}

// call runs one call (a command, or a pipeline) through the breaker: refused
// at once while it is open, else run under its own deadline (limit from now,
// when bounded) and reported by done.
func (h *hook) call(ctx context.Context, limit time.Duration, bounded, timed bool, run func(context.Context) error) error {
	ticket, err := h.breaker.Allow()
	if err != nil {
		h.metrics.refused.Inc()
		return &UnavailableError{Err: err}
	}
	start := time.Now()
	own := ownDeadline(start, limit, bounded)
	return h.done(ctx, ticket, run(bound(ctx, own)), limit, own, start, timed)
}

// outside runs one ordinary call without asking the breaker, for the
// readiness check when the half-open breaker's probe is another call's: bounded
// by command_timeout (or the caller's deadline, when sooner) and counted like
// any command, its outcome reported to no breaker. It is not timed: the
// histogram holds the calls the breaker admitted.
func (h *hook) outside(ctx context.Context, run func(context.Context) error) error {
	err := run(bound(ctx, ownDeadline(time.Now(), h.timeout, true)))
	var reply redis.Error
	if err == nil || err == redis.Nil || errors.As(err, &reply) && !unavailableReply(reply.Error()) {
		h.metrics.ok.Inc()
	} else {
		h.metrics.failed.Inc()
	}
	return err
}

// limit returns a command's deadline from now, and false when only the caller's
// context bounds it (a blocking command with a wait of 0).
func (h *hook) limit(wait time.Duration, blocking bool) (time.Duration, bool) {
	if blocking && wait == 0 {
		return 0, false
	}
	return h.timeout + wait, true
}

// done reports the command's outcome to the breaker and the metrics (its
// time since start when timed — a blocking command's time is its wait, not
// Redis's answer, and is left out; ok when Redis answered, error otherwise)
// and returns its error, wrapped in an *UnavailableError when Redis did not
// answer.
//
//   - nil and redis.Nil (a miss) are successes;
//   - an error reply is a success (Redis answered), except those saying the
//     server cannot serve now (LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN,
//     READONLY), which are failures;
//   - a closed client is no evidence either way;
//   - a command cut by its caller (its context was cancelled, or its deadline
//     was sooner than own and passed: resilience.CutByCaller) is no evidence
//     either way. A cancelled caller gets go-redis's error back as is; one
//     whose deadline passed gets the usual *UnavailableError, with no
//     command_timeout in it and matching context.DeadlineExceeded;
//   - command_timeout expired with no answer is a hang: with nothing
//     answered since the command was admitted it opens the breaker at once
//     (resilience.Ticket.TripOnSilence), so the request's next command is
//     refused instead of being a probe that waits command_timeout again;
//   - anything else (refused or broken connections, pool timeouts) is a
//     failure.
func (h *hook) done(ctx context.Context, t resilience.Ticket, err error, limit time.Duration, own, start time.Time, timed bool) error {
	if timed {
		h.metrics.took.Observe(time.Since(start).Seconds())
	}
	if err == nil || err == redis.Nil {
		t.Done(resilience.Success)
		h.metrics.ok.Inc()
		return err
	}
	var reply redis.Error
	if errors.As(err, &reply) && !unavailableReply(reply.Error()) {
		t.Done(resilience.Success)
		h.metrics.ok.Inc()
		return err
	}
	h.metrics.failed.Inc()
	if errors.Is(err, redis.ErrClosed) {
		t.Done(resilience.Ignore)
		return err
	}
	if resilience.CutByCaller(ctx, own) {
		t.Done(resilience.Ignore)
		if errors.Is(ctx.Err(), context.Canceled) {
			return err // the caller gave up: nobody reads a 503
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (the caller's, before command_timeout): %w", context.DeadlineExceeded, err)
		}
		return &UnavailableError{Err: err}
	}
	ue := &UnavailableError{Err: err}
	if resilience.IsTimeout(err) && !errors.Is(err, redis.ErrPoolTimeout) {
		// command_timeout expired with no answer: a hang, which opens the
		// breaker at once when Redis answered nothing meanwhile.
		t.TripOnSilence()
		ue.Timeout = limit
	} else {
		t.Done(resilience.Failure)
	}
	return ue
}

// unavailableReply reports whether an error reply means the server cannot serve
// now rather than that the command was wrong.
func unavailableReply(msg string) bool {
	for _, prefix := range [...]string{"LOADING", "BUSY ", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// commandWait returns how long a blocking command may wait by its own arguments,
// and whether the command is a blocking one. A wait of 0 means forever.
func commandWait(cmd redis.Cmder) (time.Duration, bool) {
	args := cmd.Args()
	if len(args) == 0 {
		return 0, false
	}
	name, ok := args[0].(string)
	if !ok || name == "" {
		return 0, false
	}
	switch name[0] {
	case 'b', 'B', 'x', 'X', 'w', 'W':
	default:
		return 0, false // the common case, decided without lower-casing
	}
	switch strings.ToLower(name) {
	case "blpop", "brpop", "brpoplpush", "blmove", "bzpopmin", "bzpopmax":
		return seconds(args[len(args)-1])
	case "blmpop", "bzmpop":
		if len(args) > 1 {
			return seconds(args[1])
		}
	case "xread", "xreadgroup":
		// Options come before STREAMS; after it are keys and IDs, and a key
		// named "block" must not count. XREADGROUP starts with GROUP g c.
		first := 1
		if len(name) == len("xreadgroup") {
			first = 4
		}
		for i := first; i+1 < len(args); i++ {
			s, ok := args[i].(string)
			if !ok {
				continue
			}
			if strings.EqualFold(s, "streams") {
				break
			}
			if strings.EqualFold(s, "block") {
				return millis(args[i+1])
			}
		}
	case "wait":
		if len(args) > 2 {
			return millis(args[2])
		}
	case "waitaof":
		if len(args) > 3 {
			return millis(args[3])
		}
	}
	return 0, false
}

func seconds(v any) (time.Duration, bool) {
	f, ok := number(v)
	if !ok || f < 0 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

func millis(v any) (time.Duration, bool) {
	f, ok := number(v)
	if !ok || f < 0 {
		return 0, false
	}
	return time.Duration(f * float64(time.Millisecond)), true
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case string:
		f, err := strconv.ParseFloat(n, 64)
		return f, err == nil
	case []byte:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	}
	return 0, false
}

var _ redis.Hook = (*hook)(nil)
