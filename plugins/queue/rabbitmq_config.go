package queue

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// RabbitMQConfig is the [plugin.queue.rabbitmq] table, used when backend =
// "rabbitmq".
type RabbitMQConfig struct {
	// URL is the broker, amqp://user:password@host:port/vhost (or amqps://). A
	// deploy key: JFAST_QUEUE_RABBITMQ__URL wins over the file. In production
	// the broker's default guest/guest credentials are refused at boot.
	// Defaults to "amqp://guest:guest@127.0.0.1:5672/".
	URL string `koanf:"url"`

	// Exchange is the durable direct exchange jobs are published to; the dead
	// letter goes through "<exchange>.dead". Letters, digits, _ - . and :, at
	// most 200, not starting with "amq.". Defaults to "jfast".
	Exchange string `koanf:"exchange"`

	// QueuePrefix starts the name of every queue the backend declares: the work
	// queue "<prefix><queue>", its delay queues "<prefix><queue>.delay.<ms>",
	// its dead letter "<prefix><queue>.dead" and unique-key locks
	// "<prefix><queue>.unique.<hash>". Same characters as exchange, at most 150.
	// Defaults to "jfast.".
	QueuePrefix string `koanf:"queue_prefix"`

	// ConnectTimeout bounds one connection attempt (TCP and the AMQP
	// handshake). Defaults to 5s.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`

	// Heartbeat is the AMQP heartbeat interval: a broker that sends nothing for
	// three intervals is taken as gone and the connection is re-made. Defaults
	// to 10s.
	Heartbeat time.Duration `koanf:"heartbeat"`
}

// DefaultRabbitMQURL is the development broker: the machine's RabbitMQ with
// its default account, refused when app.env is production.
const DefaultRabbitMQURL = "amqp://guest:guest@127.0.0.1:5672/"

func defaultRabbitMQConfig() RabbitMQConfig {
	return RabbitMQConfig{
		URL:            DefaultRabbitMQURL,
		Exchange:       "jfast",
		QueuePrefix:    "jfast.",
		ConnectTimeout: 5 * time.Second,
		Heartbeat:      10 * time.Second,
	}
}

// brokerConsumerTimeout is RabbitMQ's default consumer_timeout: a delivery
// not acked within it makes the broker close the consumer's channel.
const brokerConsumerTimeout = 30 * time.Minute

var amqpNameRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// DeployKeys implements framework.DeployKeyer: the broker URL (it carries the
// password) comes from the environment when set there.
func (p *Plugin) DeployKeys() []string { return []string{"rabbitmq.url"} }

// validateRabbitMQ checks [plugin.queue.rabbitmq] when the backend uses it.
func (c *Config) validateRabbitMQ(v *framework.Validation) {
	if c.Backend != "rabbitmq" {
		return
	}
	r := &c.RabbitMQ
	rv := v.Sub("rabbitmq")
	u, err := url.Parse(r.URL)
	switch {
	case r.URL == "":
		rv.Error("url", "is empty", `set url = "amqp://user:password@host:5672/vhost" or JFAST_QUEUE_RABBITMQ__URL`)
	case err != nil:
		rv.Error("url", "is not a URL: "+redactURLErr(err), `set url = "amqp://user:password@host:5672/vhost"`)
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		rv.Error("url", fmt.Sprintf("scheme %q is not amqp or amqps", u.Scheme), `set url = "amqp://user:password@host:5672/vhost"`)
	case u.Host == "":
		rv.Error("url", "has no host", `set url = "amqp://user:password@host:5672/vhost"`)
	case v.Production() && guestCredentials(u):
		rv.Error("url", "uses the broker's default guest/guest account, refused in production", "create a user for this service on the broker and set JFAST_QUEUE_RABBITMQ__URL with its credentials")
	}
	checkName := func(key, val string, maxLen int) {
		switch {
		case val == "":
			rv.Error(key, "is empty", fmt.Sprintf("set %s = %q", key, map[string]string{"exchange": "jfast", "queue_prefix": "jfast."}[key]))
		case len(val) > maxLen || !amqpNameRe.MatchString(val):
			rv.Error(key, fmt.Sprintf("%q must be letters, digits, _ - . and :, at most %d", val, maxLen), fmt.Sprintf("set %s = %q", key, strings.Map(func(r rune) rune {
				if amqpNameRe.MatchString(string(r)) {
					return r
				}
				return '_'
			}, val)))
		case strings.HasPrefix(strings.ToLower(val), "amq."):
			rv.Error(key, fmt.Sprintf("%q starts with \"amq.\", a prefix the broker reserves", val), fmt.Sprintf("set %s = %q", key, "jfast."+val[4:]))
		}
	}
	checkName("exchange", r.Exchange, 200)
	checkName("queue_prefix", r.QueuePrefix, 150)
	rv.Deadline("connect_timeout", r.ConnectTimeout)
	rv.Deadline("heartbeat", r.Heartbeat)
	if r.Heartbeat > 0 && r.Heartbeat < time.Second {
		rv.Error("heartbeat", fmt.Sprintf("must be at least 1s, got %s (AMQP heartbeats are whole seconds)", r.Heartbeat), `set heartbeat = "10s"`)
	}
	for _, name := range c.queueNames() {
		if n := c.Queues[name].Prefetch; n < 0 {
			v.Error("queues."+name+".prefetch", fmt.Sprintf("must be positive (or 0 for the concurrency), got %d", n), "set prefetch = 0 or remove it")
		}
	}
	if c.JobTimeout >= brokerConsumerTimeout {
		v.Error("job_timeout", fmt.Sprintf("must stay below RabbitMQ's consumer_timeout (%s by default), got %s: the broker would close the channel of a job still running", brokerConsumerTimeout, c.JobTimeout),
			`set job_timeout = "25m" or less (or raise consumer_timeout on the broker and split the job)`)
	}
	if c.Schema != "" {
		v.Error("schema", "is a PostgreSQL setting and the backend is rabbitmq", "remove schema or set backend = \"postgres\"")
	}
}

// guestCredentials reports whether u logs in as the broker's default account
// (no user info means guest/guest in AMQP clients).
func guestCredentials(u *url.URL) bool {
	if u.User == nil {
		return true
	}
	pw, _ := u.User.Password()
	return u.User.Username() == "guest" || (u.User.Username() == "" && pw == "")
}

// redactURLErr keeps the password of an unparsable URL out of the message.
func redactURLErr(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return "invalid"
}

// redactURL hides the password of a broker URL for logs and errors.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid url)"
	}
	return u.Redacted()
}

var _ framework.DeployKeyer = (*Plugin)(nil)
