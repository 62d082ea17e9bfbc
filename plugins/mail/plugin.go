package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	gomail "github.com/wneessen/go-mail"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// Name is the plugin's name in [plugins] enabled.
const Name = "mail"

// JobKind is the queue job kind of a delivery. Dead deliveries carry it in the
// queue's dead letter.
const JobKind = "mail.send"

// Plugin is the mail plugin: Send validates a message and enqueues it; a queue
// job delivers it. Make it with New.
type Plugin struct {
	cfg    Config
	log    *slog.Logger
	clock  resilience.Clock
	jobs   framework.Jobs
	sender *smtpSender
	sent   *prometheus.CounterVec
	took   *prometheus.HistogramVec
	roots  *x509.CertPool // tests only (export_test.go); nil is the system pool

	mu   sync.Mutex
	last *Delivery // the last delivery attempt in this process, nil before one

	dead deadCounts // the /ready check's dead-letter counts
}

// Delivery is the outcome of one delivery attempt, as /ready reports the last.
type Delivery struct {
	// At is when the attempt ended.
	At time.Time `json:"at"`
	// Result is "sent", "transient" (retried by the queue) or "permanent"
	// (dead letter).
	Result string `json:"result"`
	// Error is the failure: the server and its reply code, without the reply
	// text (which may name recipients; the dead letter and the log have it).
	// Empty when sent.
	Error string `json:"error,omitempty"`
	// Seconds is how long the attempt took (connect to the server's last
	// reply), bounded by connect_timeout and command_timeout.
	Seconds float64 `json:"seconds"`
}

// New returns the mail plugin with its configuration defaults.
func New() *Plugin { return &Plugin{cfg: DefaultConfig()} }

// From returns the App's mail plugin, or an error naming the fix when it is not
// enabled.
func From(app *framework.App) (*Plugin, error) { return framework.Get[*Plugin](app, Name) }

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return Name }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) { p.cfg.validate(v) }

// DeployKeys implements framework.DeployKeyer: the credentials and the server
// differ per deployment.
func (p *Plugin) DeployKeys() []string {
	return []string{"host", "port", "username", "password", "from"}
}

// SecretKeys implements framework.SecretKeyer: the SMTP password.
func (p *Plugin) SecretKeys() []string { return []string{"password"} }

// Dependencies implements framework.Dependent: mail is sent from the queue.
func (p *Plugin) Dependencies() []framework.Dependency {
	return []framework.Dependency{{Name: "queue"}}
}

// Start implements framework.Starter: it registers the delivery job with the
// queue. It does no I/O: an SMTP server that is down fails deliveries (which
// the queue retries), never the boot.
func (p *Plugin) Start(_ context.Context, app *framework.App) error {
	p.log = app.Logger().With(slog.String("plugin", Name))
	p.clock = app.Clock()
	jobs, err := framework.Get[framework.Jobs](app, "queue")
	if err != nil {
		return fmt.Errorf("mail: messages are sent through the queue: %w", err)
	}
	p.jobs = jobs
	p.sender = &smtpSender{cfg: p.cfg, roots: p.roots}
	p.sent = framework.NewCounterVec("jfast_mail_deliveries_total", "Mail delivery attempts, by transport and result (sent, transient, permanent).", "transport", "result")
	p.took = framework.NewHistogramVec("jfast_mail_delivery_duration_seconds", "Time of a mail delivery attempt, by transport: the SMTP session to the server's last reply, or the error.", []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "transport")
	if err := framework.RegisterAll(app.Metrics(), p.sent, p.took); err != nil {
		return fmt.Errorf("mail: register metrics: %w", err)
	}
	if err := jobs.RegisterJob(JobKind, p.deliver); err != nil {
		return fmt.Errorf("mail: register the %s job: %w", JobKind, err)
	}
	if p.cfg.Transport == "log" {
		p.log.Info("mail transport is log: messages are written to the log, not sent")
	}
	return nil
}

// payload is a Message as stored in a job. The Message-ID is fixed at Send,
// so a retry after a delivery whose reply was lost carries the same ID and
// receivers can discard the duplicate.
type payload struct {
	Message
	MessageID string `json:"message_id"`
}

// Send validates m and enqueues its delivery; it returns once the job is
// stored, not when the mail is delivered. An invalid message is an
// *InvalidMessageError (a 422 problem) and nothing is enqueued. A queue that
// cannot take the job returns the queue's error (a 503 naming the queue).
func (p *Plugin) Send(ctx context.Context, m Message) error {
	return p.enqueue(ctx, m, nil)
}

// SendTx is Send inside tx: the delivery exists if and only if tx commits, so
// a rolled-back order sends no confirmation. It needs the queue's postgres
// backend; tx must reach the same database as the db plugin.
func (p *Plugin) SendTx(ctx context.Context, tx pgx.Tx, m Message) error {
	if tx == nil {
		return errors.New("mail: SendTx needs a transaction")
	}
	return p.enqueue(ctx, m, tx)
}

func (p *Plugin) enqueue(ctx context.Context, m Message, tx pgx.Tx) error {
	if p.jobs == nil {
		return errors.New("mail: Send called before the App started")
	}
	if m.From == "" {
		m.From = p.cfg.From
	}
	if m.ReplyTo == "" {
		m.ReplyTo = p.cfg.ReplyTo
	}
	if err := m.check(); err != nil {
		return err
	}
	body, err := json.Marshal(payload{Message: m, MessageID: newMessageID(m.From)})
	if err != nil {
		return fmt.Errorf("mail: encode message: %w", err)
	}
	opts := framework.JobOptions{Queue: p.cfg.Queue}
	if tx != nil {
		opts.Tx = tx
	}
	if err := p.jobs.EnqueueJob(ctx, JobKind, body, opts); err != nil {
		return fmt.Errorf("mail: enqueue: %w", err)
	}
	return nil
}

// newMessageID returns a unique Message-ID (without angle brackets) in the
// sender's domain.
func newMessageID(from string) string {
	domain := "localhost"
	if a, err := mail.ParseAddress(from); err == nil {
		if i := strings.LastIndexByte(a.Address, '@'); i >= 0 {
			domain = a.Address[i+1:]
		}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "@" + domain
}

// deliver is the delivery job. A 5xx reply is returned as permanent (dead
// letter, no retry); any other failure is returned as is and the queue retries
// it with backoff.
func (p *Plugin) deliver(ctx context.Context, raw []byte) error {
	var pl payload
	if err := json.Unmarshal(raw, &pl); err != nil {
		return framework.Permanent(fmt.Errorf("mail: decode message: %w", err))
	}
	msg, err := build(&pl)
	if err != nil {
		// A stored message that does not build will not build next time either.
		return framework.Permanent(fmt.Errorf("mail: build message: %w", err))
	}
	start := time.Now()
	if p.cfg.Transport == "log" {
		p.logMessage(ctx, &pl)
		p.record("sent", nil, time.Since(start))
		return nil
	}
	err = p.sender.send(ctx, msg)
	took := time.Since(start)
	if err == nil {
		p.record("sent", nil, took)
		p.log.InfoContext(ctx, "mail sent", slog.String("message_id", pl.MessageID), slog.Int("recipients", len(pl.To)+len(pl.Cc)+len(pl.Bcc)))
		return nil
	}
	var de *DeliveryError
	if errors.As(err, &de) && de.Permanent() {
		p.record("permanent", err, took)
		return framework.Permanent(err)
	}
	p.record("transient", err, took)
	return err
}

func (p *Plugin) record(result string, err error, took time.Duration) {
	d := &Delivery{At: p.clock.Now(), Result: result, Seconds: took.Seconds()}
	var de *DeliveryError
	switch {
	case errors.As(err, &de):
		d.Error = de.Summary()
	case err != nil:
		d.Error = err.Error()
	}
	p.sent.WithLabelValues(p.cfg.Transport, result).Inc()
	p.took.WithLabelValues(p.cfg.Transport).Observe(took.Seconds())
	p.mu.Lock()
	p.last = d
	p.mu.Unlock()
}

// LastDelivery returns the last delivery attempt this process made, and false
// before the first.
func (p *Plugin) LastDelivery() (Delivery, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return Delivery{}, false
	}
	return *p.last, true
}

// logMessage is the log transport: the message's headers and bodies, and the
// attachments by name and size.
func (p *Plugin) logMessage(ctx context.Context, pl *payload) {
	atts := make([]string, len(pl.Attachments))
	for i, a := range pl.Attachments {
		atts[i] = fmt.Sprintf("%s (%s, %d bytes)", a.Filename, contentType(a), len(a.Data))
	}
	p.log.InfoContext(ctx, "mail (log transport, not sent)",
		slog.String("message_id", pl.MessageID), slog.String("from", pl.From),
		slog.Any("to", pl.To), slog.Any("cc", pl.Cc), slog.Any("bcc", pl.Bcc),
		slog.String("reply_to", pl.ReplyTo), slog.String("subject", pl.Subject),
		slog.String("text", pl.Text), slog.String("html", pl.HTML), slog.Any("attachments", atts))
}

func contentType(a Attachment) string {
	if a.ContentType == "" {
		return "application/octet-stream"
	}
	return a.ContentType
}

// build turns a stored message into go-mail's.
func build(pl *payload) (*gomail.Msg, error) {
	m := gomail.NewMsg()
	if err := m.From(pl.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if len(pl.To) > 0 {
		if err := m.To(pl.To...); err != nil {
			return nil, fmt.Errorf("to: %w", err)
		}
	}
	if len(pl.Cc) > 0 {
		if err := m.Cc(pl.Cc...); err != nil {
			return nil, fmt.Errorf("cc: %w", err)
		}
	}
	if len(pl.Bcc) > 0 {
		if err := m.Bcc(pl.Bcc...); err != nil {
			return nil, fmt.Errorf("bcc: %w", err)
		}
	}
	if pl.ReplyTo != "" {
		if err := m.ReplyTo(pl.ReplyTo); err != nil {
			return nil, fmt.Errorf("reply_to: %w", err)
		}
	}
	m.Subject(pl.Subject)
	m.SetMessageIDWithValue(pl.MessageID)
	m.SetDate()
	for k, v := range pl.Headers {
		m.SetGenHeader(gomail.Header(k), v)
	}
	switch {
	case pl.Text != "" && pl.HTML != "":
		m.SetBodyString(gomail.TypeTextPlain, pl.Text)
		m.AddAlternativeString(gomail.TypeTextHTML, pl.HTML)
	case pl.HTML != "":
		m.SetBodyString(gomail.TypeTextHTML, pl.HTML)
	default:
		m.SetBodyString(gomail.TypeTextPlain, pl.Text)
	}
	for _, a := range pl.Attachments {
		if err := m.AttachReader(a.Filename, bytes.NewReader(a.Data), gomail.WithFileContentType(gomail.ContentType(contentType(a)))); err != nil {
			return nil, fmt.Errorf("attachment %s: %w", a.Filename, err)
		}
	}
	return m, nil
}

// UsesDependency reports whether messages go to an SMTP server: the log
// transport has none. The drill command asks it (drills.DependencyUser).
func (p *Plugin) UsesDependency() bool { return p.cfg.Transport == "smtp" }

var (
	_ framework.ClientPlugin = (*Plugin)(nil)
	_ framework.Dependent    = (*Plugin)(nil)
)
