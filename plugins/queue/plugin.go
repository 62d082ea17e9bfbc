package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/internal/deadline"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/requestid"
)

// Name is the plugin's name in [plugins] enabled, and the dependency named in
// its errors.
const Name = "queue"

// backendFactories builds a backend by its config name. A new backend adds its
// entry here and its name to backendNames.
var backendFactories = map[string]func() Backend{
	"postgres": func() Backend { return &riverBackend{} },
	"redis":    func() Backend { return &asynqBackend{} },
	"rabbitmq": func() Backend { return &rabbitBackend{} },
}

// Plugin is the queue plugin: enqueue jobs, run their handlers, keep the ones
// that failed for good in a dead letter. Make it with New.
type Plugin struct {
	cfg     Config
	app     *framework.App
	log     *slog.Logger
	backend Backend
	// policy is the enqueues' (newPolicy); breaker is its breaker.
	policy  *resilience.Policy
	breaker *resilience.Breaker
	backoff resilience.Backoff
	metrics *metrics
	// defQueue is the default queue, found once at Start ("" before).
	defQueue string
	// sharedTimer: the backend is a sharedTimerBackend; deadlines times its
	// enqueues' enqueue_timeout, made at the first.
	sharedTimer   bool
	deadlines     *deadline.Timer
	deadlinesOnce sync.Once

	// sends are the kinds of the kinds key: enqueued here, handled elsewhere.
	sends map[string]bool

	mu             sync.Mutex
	handlers       map[string]handler
	injectors      []func(context.Context, map[string]string)
	extract        []func(context.Context, map[string]string) context.Context
	workersStarted bool
	workersRunning bool
	workersFailed  error // why the workers did not start, for /ready
	started        bool
	stopped        bool
	stopWatch      chan struct{}
	stopping       atomic.Bool
}

// New returns the queue plugin with its configuration defaults.
func New() *Plugin {
	return &Plugin{cfg: DefaultConfig(), handlers: map[string]handler{}}
}

// From returns the App's queue plugin, or an error naming the fix when it is not
// enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, Name) }

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) { p.cfg.validate(v) }

// ResolveDefaults implements framework.Resolver: with no queue configured, the
// service works one, "default", with concurrency 10. (A map's default cannot be
// in the defaults themselves: a configured queue would be added to it.)
func (p *Plugin) ResolveDefaults(*framework.Resolution) {
	if len(p.cfg.Queues) == 0 {
		p.cfg.Queues = map[string]QueueConfig{DefaultQueue: {Concurrency: 10}}
	}
}

// Dependencies implements framework.Dependent: the db plugin (postgres backend)
// or the cache plugin (redis backend) must start first when enabled; Validate
// refuses the chosen backend when its plugin is not enabled.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "db", Optional: true}, {Name: "cache", Optional: true}}
}

// Start implements framework.Starter. It finds the shared pool or client and
// opens the backend; it does no I/O that fails when the broker is down. With
// workers = true the workers start once the App has started (so handlers
// registered in Routes are known).
func (p *Plugin) Start(ctx context.Context, app *framework.App) error {
	p.app = app
	p.log = app.Logger().With(slog.String("plugin", Name))
	shared, acquire, err := p.shared(app)
	if err != nil {
		return err
	}
	p.backoff = resilience.Backoff{Base: p.cfg.RetryBase, Max: p.cfg.RetryMax}
	p.usePolicy(app.Clock())
	m, err := newMetrics(app.Metrics())
	if err != nil {
		return err
	}
	p.metrics = m
	p.defQueue = p.defaultQueue()
	p.sends = make(map[string]bool, len(p.cfg.Kinds))
	for _, k := range p.cfg.Kinds {
		p.sends[k] = true
	}
	p.backend = backendFactories[p.cfg.Backend]()
	_, p.sharedTimer = p.backend.(sharedTimerBackend)
	env := BackendEnv{
		Config:          p.cfg,
		Queues:          p.cfg.queueNames(),
		Logger:          p.log,
		Retry:           p.retryDelay,
		ShutdownTimeout: app.Config().PluginStopTimeout,
		Shared:          shared,
		Acquire:         acquire,
	}
	if err := p.backend.Open(ctx, env); err != nil {
		return fmt.Errorf("queue: open %s backend: %w", p.cfg.Backend, err)
	}
	p.mu.Lock()
	p.started = true
	if p.cfg.Workers {
		p.stopWatch = make(chan struct{})
		go p.startWhenServing(app)
	}
	p.mu.Unlock()
	return nil
}

// startWhenServing starts the workers once the App has finished starting: the
// router exists only after Routes ran, so every handler registered at boot is
// known by then.
func (p *Plugin) startWhenServing(app *framework.App) {
	for app.Router() == nil {
		select {
		case <-p.stopWatch:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	select {
	case <-p.stopWatch:
		return
	default:
	}
	if err := p.startWorkers(context.Background()); err != nil && !errors.Is(err, errNotRunning) {
		p.log.Error("queue workers did not start", slog.String("error", err.Error()))
		p.mu.Lock()
		p.workersFailed = err
		p.mu.Unlock()
	}
}

var errNotRunning = errors.New("queue: the plugin is not running")

// startWorkers starts the backend's workers once.
func (p *Plugin) startWorkers(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.stopped {
		return errNotRunning
	}
	if p.workersStarted {
		return nil
	}
	p.workersStarted = true
	kinds := make([]string, 0, len(p.handlers))
	for k := range p.handlers {
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		// Workers with no handler would fetch every job and fail it (asynq
		// and River alike): none start, and the jobs stay queued for a
		// process that has their handlers.
		p.log.Warn("queue workers not started: no job handler is registered in this process; jobs stay queued for a process that has them",
			slog.Any("queues", p.cfg.queueNames()))
		return nil
	}
	if err := p.backend.StartWorkers(ctx, executor{p}, kinds); err != nil {
		return err
	}
	p.workersRunning = true
	p.log.Info("queue workers started", slog.String("backend", p.cfg.Backend), slog.Any("queues", p.cfg.queueNames()), slog.Any("kinds", kinds))
	return nil
}

// RunWorkers implements framework.WorkerRunner (the "worker" command): it starts
// the workers (when "serve" has not already) and works jobs until ctx is done.
// The drain happens in Stop, within app.plugin_stop_timeout.
func (p *Plugin) RunWorkers(ctx context.Context) error {
	p.mu.Lock()
	none := len(p.handlers) == 0
	p.mu.Unlock()
	if none {
		return errors.New("queue: no job handler is registered in this process, so a worker would have nothing to run: register handlers with queue.Handle in the service's main (the jfast binary has none; run the service's own binary)")
	}
	if err := p.startWorkers(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// Stop implements framework.Stopper: stop fetching, wait for the running jobs
// until ctx is done, cancel the rest (they are redelivered), close the backend.
func (p *Plugin) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped || !p.started {
		p.stopped = true
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	running := p.workersRunning
	watch := p.stopWatch
	p.mu.Unlock()
	if watch != nil {
		// Not waited for: while the App is still starting (a failed start
		// stops its plugins) the watcher is blocked on the App; it sees
		// stopped and returns once the App is done. startWorkers holds p.mu
		// throughout, so running above is exact.
		close(watch)
	}
	var errs []error
	if running {
		p.stopping.Store(true)
		if err := p.backend.StopWorkers(ctx); err != nil {
			errs = append(errs, fmt.Errorf("queue: stop workers: %w", err))
		}
		p.mu.Lock()
		p.workersRunning = false
		p.mu.Unlock()
	}
	if err := p.backend.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("queue: close %s backend: %w", p.cfg.Backend, err))
	}
	return errors.Join(errs...)
}

// AddMetadataHooks is the seam for trace propagation (the telemetry plugin):
// inject writes into a job's metadata when it is enqueued (from the enqueuing
// context), extract returns the job's context from its metadata when it runs.
// Either may be nil. Call it from a plugin's Start.
func (p *Plugin) AddMetadataHooks(inject func(context.Context, map[string]string), extract func(context.Context, map[string]string) context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if inject != nil {
		p.injectors = append(p.injectors, inject)
	}
	if extract != nil {
		p.extract = append(p.extract, extract)
	}
}

func (p *Plugin) extractors() []func(context.Context, map[string]string) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.extract
}

func (p *Plugin) defaultQueue() string {
	if p.defQueue != "" {
		return p.defQueue
	}
	if _, ok := p.cfg.Queues[DefaultQueue]; ok {
		return DefaultQueue
	}
	return p.cfg.queueNames()[0]
}

// message builds the stored form of a job.
func (p *Plugin) message(ctx context.Context, kind string, payload any, opts []Option) (*Message, error) {
	if !p.started {
		return nil, errors.New("queue: the queue plugin is not started")
	}
	if !validKind(kind) {
		return nil, kindError(kind)
	}
	var o options
	if len(opts) > 0 {
		// Options write through a pointer the compiler cannot follow: only
		// a call that has options pays for o on the heap.
		po := new(options)
		for _, opt := range opts {
			opt(po)
		}
		o = *po
	}
	if o.queue == "" {
		o.queue = p.defaultQueue()
	}
	if !framework.ValidName(o.queue) {
		return nil, fmt.Errorf("queue: queue name %q must be %s", o.queue, framework.NameRule)
	}
	if p.cfg.Backend == "postgres" && !riverQueueName(o.queue) {
		return nil, fmt.Errorf("queue: queue name %q must be %s on the postgres backend (River's rule)", o.queue, RiverQueueRule)
	}
	if o.timeout < 0 || o.timeout > p.cfg.JobTimeout {
		return nil, fmt.Errorf("queue: timeout %s for %s must be positive and at most job_timeout (%s)", o.timeout, kind, p.cfg.JobTimeout)
	}
	if o.maxAttempts < 0 {
		return nil, fmt.Errorf("queue: max attempts for %s must be positive, got %d", kind, o.maxAttempts)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("queue: encode %s payload: %w", kind, err)
	}
	var md map[string]string
	p.mu.Lock()
	injectors := p.injectors
	declared := p.declared(kind)
	p.mu.Unlock()
	if !declared {
		return nil, p.undeclared(kind)
	}
	if len(injectors) > 0 {
		md = map[string]string{}
		for _, inj := range injectors {
			inj(ctx, md)
		}
	}
	body, err := encodeEnvelope(raw, requestid.FromContext(ctx), md, o.timeout.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("queue: encode %s envelope: %w", kind, err)
	}
	m := &Message{Kind: kind, Queue: o.queue, Envelope: body, MaxAttempts: p.cfg.MaxAttempts, UniqueKey: o.uniqueKey, Timeout: p.cfg.JobTimeout}
	if o.timeout > 0 {
		m.Timeout = o.timeout
	}
	if o.maxAttempts > 0 {
		m.MaxAttempts = o.maxAttempts
	}
	switch {
	case !o.runAt.IsZero():
		m.RunAt = o.runAt
	case o.delay > 0:
		m.RunAt = time.Now().Add(o.delay)
	}
	return m, nil
}

// declared reports whether kind may be enqueued here: a handler registered
// for it, or listed in the kinds key. p.mu is held.
func (p *Plugin) declared(kind string) bool {
	_, handled := p.handlers[kind]
	return handled || p.sends[kind]
}

// undeclaredKindLabel is the kind label of an enqueue refused for a kind this
// process does not declare: the kind is the caller's string, and as a label
// every misspelt kind (or one made from input) would add a series. The kind
// rule refuses parentheses, so no kind has this name.
const undeclaredKindLabel = "(undeclared)"

// refused counts an enqueue refused at the call, before anything was sent (a
// bad or undeclared kind, a payload that does not encode, a bad option), with
// outcome "invalid" (not enqueued, and nothing sent: the status page counts
// no attempt at the broker for it), and returns its error. Before Start
// there are no metrics to count in.
func (p *Plugin) refused(kind string, err error) (Result, error) {
	if p.metrics != nil { // made at Start
		p.mu.Lock()
		if !p.declared(kind) {
			kind = undeclaredKindLabel
		}
		p.mu.Unlock()
		p.metrics.enqueued(kind, "invalid")
	}
	return Result{}, notEnqueued(err)
}

// undeclared is the error of an Enqueue of a kind no handler in this process
// registered and the kinds key does not list: most likely a typo or a
// forgotten handler, and a job no worker would ever run.
func (p *Plugin) undeclared(kind string) error {
	known := p.kinds()
	list := "none"
	if len(known) > 0 {
		list = strings.Join(known, ", ")
	}
	return fmt.Errorf("queue: job kind %q is not declared in this service (declared: %s): register its handler with queue.Handle where it runs, or, when another service runs it, list it in [plugin.queue] kinds", kind, list)
}

// kinds returns the declared kinds, handled here or listed in kinds, sorted.
func (p *Plugin) kinds() []string {
	p.mu.Lock()
	ks := make([]string, 0, len(p.handlers)+len(p.sends))
	for k := range p.handlers {
		ks = append(ks, k)
	}
	p.mu.Unlock()
	for k := range p.sends {
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// encodeEnvelope writes the envelope around an already encoded payload, so the
// payload is not decoded and encoded a second time (the shape is envelope's).
func encodeEnvelope(payload []byte, requestID string, md map[string]string, timeoutMS int64) ([]byte, error) {
	buf := make([]byte, 0, len(payload)+len(requestID)+48)
	buf = append(buf, `{"payload":`...)
	buf = append(buf, payload...)
	if requestID != "" {
		rid, err := json.Marshal(requestID)
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"request_id":`...)
		buf = append(buf, rid...)
	}
	if len(md) > 0 {
		m, err := json.Marshal(md)
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"metadata":`...)
		buf = append(buf, m...)
	}
	if timeoutMS > 0 {
		buf = append(buf, `,"timeout_ms":`...)
		buf = strconv.AppendInt(buf, timeoutMS, 10)
	}
	return append(buf, '}'), nil
}

// Enqueue stores a job of kind with payload (encoded as JSON). It returns within
// enqueue_timeout (5 s by default); when the broker does not answer, or a
// breaker in front of it is open (the queue's, or the db or cache plugin's the
// backend goes through), it returns a *problem.DependencyError naming "queue"
// (a 503 when a handler returns it). Every error matches, with errors.Is,
// either [ErrNotEnqueued] (the job does not exist: enqueueing again is safe)
// or [ErrMaybeEnqueued] (it was sent and not confirmed: it may exist). The
// request ID of ctx is stored with the job and restored in the handler's
// context. A kind that no handler in this process registered and that
// [plugin.queue] kinds does not list is refused at once (matching
// ErrNotEnqueued), naming the fix.
func (p *Plugin) Enqueue(ctx context.Context, kind string, payload any, opts ...Option) (Result, error) {
	m, err := p.message(ctx, kind, payload, opts)
	if err != nil {
		return p.refused(kind, err)
	}
	return p.guard(ctx, kind, m, nil)
}

// EnqueueTx stores a job inside tx: it exists if and only if tx commits. Only
// the postgres backend supports it; the pool of tx must reach the same database
// as the db plugin's. The enqueue deadline and breaker apply as in Enqueue. Its
// errors match [ErrNotEnqueued]: the job is not in tx (and a tx whose
// connection broke cannot commit).
func (p *Plugin) EnqueueTx(ctx context.Context, tx pgx.Tx, kind string, payload any, opts ...Option) (Result, error) {
	_, ok := p.backend.(TxBackend)
	if !ok {
		return p.refused(kind, fmt.Errorf("queue: EnqueueTx needs backend = \"postgres\"; the %s backend cannot join a PostgreSQL transaction", p.cfg.Backend))
	}
	m, err := p.message(ctx, kind, payload, opts)
	if err != nil {
		return p.refused(kind, err)
	}
	return p.guard(ctx, kind, m, tx)
}

// guard runs one enqueue through the queue's policy (the one attempt loop of
// jfast's outbound calls: the breaker, enqueue_timeout, a retry of a publish
// whose connection failed, within the retry budget), and says in the error
// whether the job may exist.
//
// With tx it stores m inside tx (the backend is a TxBackend: EnqueueTx
// checked), else on the backend.
func (p *Plugin) guard(ctx context.Context, kind string, m *Message, tx pgx.Tx) (Result, error) {
	c := enqueueCalls.Get().(*enqueueCall)
	c.backend, c.m, c.tx = p.backend, m, tx
	defer c.put()
	if err := p.policy.Begin(ctx, &c.run, resilience.RunOpts{}); err != nil {
		// The policy has no bulkhead and no throttle: its breaker refused.
		p.metrics.enqueued(kind, "circuit_open")
		return Result{}, &problem.DependencyError{Dependency: Name, Err: notEnqueued(err), RetryAfter: retryAfterOf(err)}
	}
	c.run.Attempts(c)
	// The breaker counts the last attempt's outcome, after the loop's rules:
	// an attempt the caller cut is no evidence, and one that hung with
	// nothing answered since the enqueue began has opened the breaker
	// already (not half-open: a request's next enqueue is refused at once
	// instead of being a probe that waits enqueue_timeout again).
	c.run.End(c.run.Outcome())
	if c.run.Made() > 1 {
		p.metrics.enqueued(kind, "retried")
	}
	err, maybe := c.err, c.maybe
	if refused := err != nil && !maybe && refusedByBreaker(err) && c.run.Made() == 1; !refused {
		// From the call's admission, on the policy's clock: one reading
		// more, where the call's start is the loop's own. An enqueue the
		// db or cache plugin's breaker refused did no I/O: not timed.
		p.metrics.enqDur.Observe(p.policy.Clock().Now().Sub(c.run.Start()).Seconds())
	}
	if err == nil {
		p.metrics.enqueuedOK(kind)
		return c.res, nil
	}
	switch {
	case ctx.Err() != nil:
		// The caller gave up: that says nothing about the broker.
		p.metrics.enqueued(kind, "cancelled")
		return Result{}, mark(fmt.Errorf("queue: enqueue %s: %w", kind, unmark(err)), maybe)
	case !maybe && refusedByBreaker(err):
		p.metrics.enqueued(kind, "circuit_open")
		return Result{}, &problem.DependencyError{Dependency: Name, Err: mark(fmt.Errorf("enqueue %s on %s: %w", kind, p.cfg.Backend, unmark(err)), false), RetryAfter: retryAfterOf(err)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within enqueue_timeout (%s): %w", p.cfg.EnqueueTimeout, unmark(err))
	}
	de := &problem.DependencyError{Dependency: Name, Err: mark(fmt.Errorf("enqueue %s on %s: %w", kind, p.cfg.Backend, unmark(err)), maybe)}
	if maybe {
		p.metrics.enqueued(kind, "unconfirmed")
		return Result{}, &unconfirmedError{dep: de}
	}
	p.metrics.enqueued(kind, "invalid")
	return Result{}, de
}

// enqueueCall is one enqueue on the policy's loop: its Run, the backend's
// call, and what its attempts said. It is the loop's resilience.Attempter.
// They are pooled: an enqueue would otherwise allocate one, and its Run is
// the larger part of what the policy loop adds to an enqueue.
type enqueueCall struct {
	run     resilience.Run
	backend Backend
	m       *Message
	tx      pgx.Tx // EnqueueTx's; nil: Enqueue
	res     Result
	err     error // the last attempt's
	maybe   bool  // an attempt may have stored the job
}

var enqueueCalls = sync.Pool{New: func() any { return new(enqueueCall) }}

// put returns c to the pool, holding nothing of its enqueue. The loop has
// ended: no attempt runs beside the caller (an enqueue is never hedged).
func (c *enqueueCall) put() {
	*c = enqueueCall{}
	enqueueCalls.Put(c)
}

// Attempt makes one enqueue on the backend and reads it by the queue's rules.
func (c *enqueueCall) Attempt(ctx context.Context, _ int) resilience.Verdict {
	if c.tx != nil {
		c.res, c.err = c.backend.(TxBackend).EnqueueTx(ctx, c.tx, c.m)
		c.err = notEnqueued(c.err) // the job is only in the caller's transaction
	} else {
		c.res, c.err = c.backend.Enqueue(ctx, c.m)
	}
	if c.err == nil {
		return resilience.Verdict{Outcome: resilience.Success}
	}
	maybe := mayBeEnqueued(c.err)
	c.maybe = c.maybe || maybe
	v := resilience.Verdict{Err: c.err, Outcome: resilience.Failure}
	switch {
	case !maybe && refusedByBreaker(c.err):
		// The db or cache plugin's breaker refused the connection or the
		// command, with no I/O: the answer is as fast as the queue's own
		// breaker would give, and the evidence is that breaker's, so it
		// does not count again here.
		v.Outcome = resilience.Ignore
	case resilience.IsTimeout(c.err):
		// No answer within enqueue_timeout: a hang (the loop's silence rule).
		v.Outcome = resilience.Hang
	case retryableEnqueue(c.err):
		// docs/design.md, "Per-dependency defaults": a publish is retried
		// once, at once (the connection failed; the pool hands out another),
		// within the same deadline. If the first attempt may have been
		// stored (its reply was lost), the job can then exist twice, which
		// at-least-once handlers tolerate; and if the retry fails too, the
		// job may still exist.
		v.Retry, v.Asked = true, true
	}
	return v
}

// Report implements resilience.Attempter: the retry is counted once the
// call ends (guard).
func (c *enqueueCall) Report(resilience.AttemptRecord) {}

// enqueueAttempts is an enqueue's tries: a publish is retried once.
const enqueueAttempts = 2

// newPolicy makes the policy enqueues go through: the breaker from the
// breaker_* keys, enqueue_timeout as the whole call's bound, two attempts,
// the retry budget at the policy defaults, and no bulkhead (an enqueue
// waits for the db or cache plugin's connection, whose pool bounds how
// many are in flight). Its deadlines are enqueueContext's.
func (p *Plugin) newPolicy(clock resilience.Clock) *resilience.Policy {
	log := p.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := resilience.DefaultPolicyConfig()
	cfg.Attempts, cfg.Timeout, cfg.BreakerConfig = enqueueAttempts, p.cfg.EnqueueTimeout, p.cfg.BreakerConfig
	return resilience.NewPolicy(resilience.PolicyOpts{
		Name: Name, Config: cfg, Clock: clock,
		OnStateChange: resilience.LogStateChanges(log, Name, p.cfg.BreakerCoolDown, nil),
		WithDeadline:  p.enqueueContext,
		NoBulkhead:    true,
	})
}

// usePolicy makes the plugin's policy (newPolicy) on clock.
func (p *Plugin) usePolicy(clock resilience.Clock) {
	p.policy = p.newPolicy(clock)
	p.breaker = p.policy.Breaker()
}

// enqueueContext puts an enqueue's deadline on its caller's context, the
// policy's WithDeadline, with the deadline context.WithTimeout would give it:
//
//   - A caller whose own deadline comes no later already bounds it: its
//     context is used as is (WithTimeout would return a cancel context under
//     it, with the same deadline; nothing the backends start outlives their
//     Enqueue, so there is nothing to cancel after it).
//   - A caller's context that never ends (Done is nil), on a backend that
//     takes it: timed by the plugin's shared timer (internal/deadline).
//   - Any other: context.WithDeadline.
func (p *Plugin) enqueueContext(ctx context.Context, at time.Time) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && !dl.After(at) {
		return ctx, noCancel
	}
	if ctx.Done() != nil || !p.sharedTimer {
		return context.WithDeadline(ctx, at)
	}
	p.deadlinesOnce.Do(func() { p.deadlines = deadline.NewTimer() })
	return p.deadlines.WithDeadline(ctx, at)
}

// noCancel ends nothing: the context of an enqueue whose caller's deadline
// bounds it is the caller's.
func noCancel() {}

// retryableEnqueue reports whether another attempt may succeed: a transport
// failure (reset, refused, closed connection), not a timeout (the deadline is
// spent, or the server is hung and would only spend it again), not a breaker
// refusing the call, not an answer from the broker (an SQL or Redis error
// reply).
func retryableEnqueue(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || refusedByBreaker(err) {
		return false
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return false
	}
	var pgErr *pgconn.PgError
	var redisErr redis.Error
	if errors.As(err, &pgErr) || errors.As(err, &redisErr) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// DeadJobs lists the dead letter, newest first.
func (p *Plugin) DeadJobs(ctx context.Context, q DeadQuery) ([]DeadJob, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	jobs, err := p.backend.Dead(ctx, q)
	if err != nil {
		return nil, p.depErr("list dead jobs", err)
	}
	return jobs, nil
}

// RetryDead makes a dead job run again. It returns ErrNotFound for an ID that
// is not in the dead letter. On postgres a dead job with a unique key whose key
// a pending job of its kind holds stays dead, and RetryDead returns an error
// saying so (not a dependency error: the database answered).
func (p *Plugin) RetryDead(ctx context.Context, id string) error {
	return p.depErr("retry dead job "+id, p.backend.RetryDead(ctx, id))
}

// DeleteDead removes a job from the dead letter. It returns ErrNotFound for an
// ID that is not in the dead letter.
func (p *Plugin) DeleteDead(ctx context.Context, id string) error {
	return p.depErr("delete dead job "+id, p.backend.DeleteDead(ctx, id))
}

// errUniqueKeyHeld is RetryDead's answer for a dead job whose unique key a
// pending job of its kind holds (on postgres, where a dead job frees its key):
// the database's answer, not its failure, so not a dependency error.
var errUniqueKeyHeld = errors.New("its unique key is held by another pending job of its kind, so it stays dead: retry it once that job is done, or delete it")

// depErr makes err a dependency error naming what failed, unless it is an
// answer about the job (ErrNotFound, errUniqueKeyHeld).
func (p *Plugin) depErr(what string, err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, errUniqueKeyHeld) {
		return err
	}
	return &problem.DependencyError{Dependency: Name, Err: fmt.Errorf("%s: %w", what, err)}
}

// Backend returns the backend in use, for tools and the conformance suite.
func (p *Plugin) Backend() Backend { return p.backend }

// BackendName is the configured backend: "postgres", "redis" or "rabbitmq".
func (p *Plugin) BackendName() string { return p.cfg.Backend }

// Breaker is the breaker enqueues go through.
func (p *Plugin) Breaker() *resilience.Breaker { return p.breaker }

var (
	_ framework.BackingServicePlugin = (*Plugin)(nil)
	_ framework.Dependent            = (*Plugin)(nil)
	_ framework.Checker              = (*Plugin)(nil)
	_ framework.WorkerRunner         = (*Plugin)(nil)
)
