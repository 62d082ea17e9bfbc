package queue

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/riverqueue/river"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Config is the [plugin.queue] table.
type Config struct {
	// Backend is where jobs live: "postgres" (River, sharing the db plugin's pool),
	// "redis" (asynq, sharing the cache plugin's client) or "rabbitmq" (its own
	// connections, see [plugin.queue.rabbitmq]). Defaults to "postgres".
	Backend string `koanf:"backend"`

	// Queues maps each queue this service works to its settings. Jobs may be
	// enqueued to any queue; workers fetch only from these. When no queue is
	// configured, one queue "default" with concurrency 10 is. Defaults to
	// {default = {concurrency = 10}}.
	Queues map[string]QueueConfig `koanf:"queues"`

	// Kinds lists the job kinds this service enqueues and another process
	// handles: a producer-only service, or jobs for a sibling service's
	// workers. An Enqueue of a kind that no handler in this process registered
	// (Handle) and that is not listed here is refused at the call, so a typo
	// or a forgotten handler is an error where it is made, not a job that no
	// worker will ever run. Defaults to [] (only the kinds handled here).
	Kinds []string `koanf:"kinds"`

	// Workers runs the job workers inside "serve". With false the service only
	// enqueues and the "worker" command runs the jobs. Defaults to true.
	Workers bool `koanf:"workers"`

	// JobTimeout bounds one attempt of a job: its context is cancelled and the
	// attempt counts as failed. A per-job Timeout option may shorten it. Zero is
	// refused. Defaults to 5m.
	JobTimeout time.Duration `koanf:"job_timeout"`

	// MaxAttempts is how many times a job runs before it goes to the dead letter.
	// Defaults to 10.
	MaxAttempts int `koanf:"attempts"`

	// RetryBase is the ceiling of the first retry's delay; later ceilings double
	// (full jitter: the delay is uniform in [0, ceiling]). Defaults to 1s.
	RetryBase time.Duration `koanf:"retry_base"`

	// RetryMax caps every retry delay. Defaults to 1h.
	RetryMax time.Duration `koanf:"retry_max"`

	// DeadRetention is how long dead jobs are kept before they are deleted
	// (postgres; the redis backend keeps them 90 days, a limit asynq fixes).
	// Defaults to 168h (7 days).
	DeadRetention time.Duration `koanf:"dead_retention"`

	// Schema is the PostgreSQL schema that holds the job tables; River's
	// migrations are applied there. Must be an identifier. Empty means the
	// connection's search_path (normally public). Defaults to "".
	Schema string `koanf:"schema"`

	// EnqueueTimeout bounds one Enqueue: waiting for a connection and the
	// insert/publish. Defaults to 5s.
	EnqueueTimeout time.Duration `koanf:"enqueue_timeout"`

	// RescueAfter is how long after an attempt started a job whose worker
	// vanished (process killed, host lost) is given to another worker. It must
	// exceed job_timeout. Postgres only: the redis backend's lease (30 s, plus
	// 30 s of clock-skew margin, checked every minute) is fixed by asynq.
	// Must be at least job_timeout + 1s.
	// Defaults to 6m.
	RescueAfter time.Duration `koanf:"rescue_after"`

	// PollInterval is how often idle workers look for due jobs (scheduled,
	// retried) besides the backend's own notifications. On postgres it bounds
	// how late a delayed job runs (docs/queue.md, "Retries") and must be at
	// least 1ms, River's shortest. Defaults to 1s.
	PollInterval time.Duration `koanf:"poll_interval"`

	// BreakerConfig is the breaker_* keys of the enqueue breaker.
	resilience.BreakerConfig `koanf:",squash"`

	// RabbitMQ is the [plugin.queue.rabbitmq] table, used by backend =
	// "rabbitmq". Defaults to the machine's broker (see RabbitMQConfig).
	RabbitMQ RabbitMQConfig `koanf:"rabbitmq"`
}

// Applies implements framework.ConditionalKeys: the config command and the
// jfast.toml jfast new writes leave out the keys of the backends not chosen
// (the rabbitmq table but with backend = "rabbitmq"; schema and
// dead_retention, River's, but with "postgres"). An unknown backend, which
// validation refuses, shows every key.
func (c Config) Applies(key string) bool {
	if !slices.Contains(backendNames, c.Backend) {
		return true
	}
	switch key {
	case "rabbitmq":
		return c.Backend == "rabbitmq"
	case "schema", "dead_retention":
		return c.Backend == "postgres"
	}
	return true
}

var _ framework.ConditionalKeys = Config{}

// QueueConfig is one [plugin.queue.queues.<name>] table.
type QueueConfig struct {
	// Concurrency is how many jobs of this queue run at once in one process.
	// Defaults to 10.
	Concurrency int `koanf:"concurrency"`

	// Prefetch is how many unacknowledged jobs of this queue the rabbitmq
	// backend lets the broker send one process; 0 means the concurrency.
	// Defaults to 0.
	Prefetch int `koanf:"prefetch"`
}

// SetDefaults implements framework.Defaulter.
func (q *QueueConfig) SetDefaults() { q.Concurrency = 10 }

// DefaultConfig returns the configuration defaults.
func DefaultConfig() Config {
	return Config{
		Backend:        "postgres",
		Workers:        true,
		JobTimeout:     5 * time.Minute,
		MaxAttempts:    10,
		RetryBase:      time.Second,
		RetryMax:       time.Hour,
		DeadRetention:  7 * 24 * time.Hour,
		EnqueueTimeout: 5 * time.Second,
		RescueAfter:    6 * time.Minute,
		PollInterval:   time.Second,
		// The broker has a breaker (docs/design.md, "Per-dependency
		// defaults"), with the framework's defaults.
		BreakerConfig: resilience.DefaultBreakerConfig(),
		RabbitMQ:      defaultRabbitMQConfig(),
	}
}

var identifierRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// DefaultQueue is the queue jobs go to without the [Queue] option, and the one
// queue worked when none is configured.
const DefaultQueue = "default"

// backendNames are the backends this build knows, by config name.
var backendNames = []string{"postgres", "redis", "rabbitmq"}

func (c *Config) validate(v *framework.Validation) {
	known := false
	for _, b := range backendNames {
		known = known || c.Backend == b
	}
	switch {
	case !known:
		v.Error("backend", fmt.Sprintf("unknown backend %q", c.Backend), `set backend = "postgres", "redis" or "rabbitmq"`)
	case c.Backend == "postgres":
		v.RequirePlugin("backend", "db", `backend "postgres" uses the db plugin's pool`, `set [plugin.queue] backend = "redis" (with the cache plugin) or "rabbitmq"`)
	case c.Backend == "redis":
		v.RequirePlugin("backend", "cache", `backend "redis" uses the cache plugin's client`, `set [plugin.queue] backend = "postgres" (with the db plugin) or "rabbitmq"`)
	}
	names := make([]string, 0, len(c.Queues))
	for name := range c.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !queuesTable.ValidateName(v, name) && framework.Unread(name) {
			continue
		}
		if c.Backend == "postgres" && framework.ValidName(name) && !riverQueueName(name) {
			v.Error("queues."+name, fmt.Sprintf("queue name %q is not one the postgres backend (River) takes: it must also be %s", name, RiverQueueRule),
				"rename the queue, e.g. \"orders_high\" for \"orders__high_\"")
		}
		v.Positive("queues."+name+".concurrency", c.Queues[name].Concurrency)
	}
	for i, k := range c.Kinds {
		if !validKind(k) {
			v.Error(fmt.Sprintf("kinds[%d]", i), fmt.Sprintf("job kind %q must be %s", k, KindRule), `write the kind as the handling service registers it, e.g. "send_receipt"`)
		}
	}
	v.Deadline("job_timeout", c.JobTimeout)
	v.Positive("attempts", c.MaxAttempts)
	v.Deadline("retry_base", c.RetryBase)
	v.Deadline("retry_max", c.RetryMax)
	if c.RetryBase > 0 && c.RetryMax > 0 && c.RetryMax < c.RetryBase {
		v.Error("retry_max", fmt.Sprintf("must be at least retry_base (%s), got %s", c.RetryBase, c.RetryMax), "raise retry_max or lower retry_base")
	}
	v.Deadline("dead_retention", c.DeadRetention)
	v.Deadline("enqueue_timeout", c.EnqueueTimeout)
	v.Deadline("rescue_after", c.RescueAfter)
	v.Deadline("poll_interval", c.PollInterval)
	if c.Backend == "postgres" && c.PollInterval > 0 && c.PollInterval < river.FetchPollIntervalMin {
		v.Error("poll_interval", fmt.Sprintf("must be at least %s on the postgres backend (River's shortest), got %s", river.FetchPollIntervalMin, c.PollInterval),
			fmt.Sprintf("set poll_interval = %q or more", river.FetchPollIntervalMin.String()))
	}
	c.BreakerConfig.Validate(v)
	if c.Backend == "postgres" && c.JobTimeout > 0 && c.RescueAfter > 0 && c.RescueAfter < c.JobTimeout+time.Second {
		// River's rescuer: the other backends have no rescue_after.
		v.Error("rescue_after", fmt.Sprintf("must exceed job_timeout (%s) by at least 1s, got %s: a running job would be handed to a second worker", c.JobTimeout, c.RescueAfter),
			fmt.Sprintf("set rescue_after to at least job_timeout plus a margin, e.g. %q", (c.JobTimeout+time.Minute).String()))
	}
	if c.Schema != "" && !identifierRe.MatchString(c.Schema) {
		v.Error("schema", fmt.Sprintf("%q is not an identifier (letters, digits and _, starting with a letter or _, at most 63)", c.Schema), `set schema = "jobs" or leave it empty for the search_path`)
	}
	c.validateRabbitMQ(v)
	if c.Schema != "" && c.Backend == "redis" {
		v.Error("schema", "is a PostgreSQL setting and the backend is redis", "remove schema or set backend = \"postgres\"")
	}
}

// queuesTable is [plugin.queue.queues], in the words of its errors.
var queuesTable = framework.NamedTable{Plugin: "queue", Key: "queues", Noun: "queue", Nouns: "queues"}

// queueNames returns the configured queue names, sorted.
func (c *Config) queueNames() []string {
	names := make([]string, 0, len(c.Queues))
	for n := range c.Queues {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
