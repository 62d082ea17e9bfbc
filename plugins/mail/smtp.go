package mail

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// smtpSender delivers one message per connection with go-mail. Connections are
// not pooled: delivery runs in queue workers, where a connect per message costs
// nothing a request waits for, and a fresh connection never hits a server's
// idle timeout.
type smtpSender struct {
	cfg Config
	// roots verifies the server's certificate; nil means the system's pool.
	roots *x509.CertPool
}

// send delivers m. A returned error with a 5xx reply code is a *DeliveryError
// with Permanent() true; everything else (refused, timeouts, 4xx) is transient.
func (s *smtpSender) send(ctx context.Context, m *gomail.Msg) error {
	var conn *deadlineConn // the attempt's connection, once dialled
	c, err := gomail.NewClient(s.cfg.Host, s.options(ctx, &conn)...)
	if err != nil {
		return fmt.Errorf("mail: smtp client for %s: %w", s.addr(), err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		expired := conn.expired()
		if conn == nil && ctx.Err() != nil {
			expired = jobEnded(ctx, "the connection")
		}
		return classify(s.addr(), err, expired)
	}
	return nil
}

// jobEnded is what leads the error of an attempt whose job's context ended
// (job_timeout, shutdown) while it waited for what: as a timeout names the
// wait that ran out.
func jobEnded(ctx context.Context, what string) string {
	return fmt.Sprintf("the job's context ended (%v) while waiting for %s", context.Cause(ctx), what)
}

func (s *smtpSender) addr() string {
	return net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
}

// options configures go-mail for one attempt; the connection it dials is
// stored in conn.
func (s *smtpSender) options(job context.Context, conn **deadlineConn) []gomail.Option {
	opts := []gomail.Option{
		gomail.WithPort(s.cfg.Port),
		// go-mail uses this for the dial and as a whole-connection deadline it
		// sets after connecting; the connection below replaces the latter with
		// per-operation deadlines (command_timeout).
		gomail.WithTimeout(s.cfg.ConnectTimeout),
		gomail.WithDialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
			dc, c, err := s.dial(ctx, job, network, addr)
			*conn = dc
			return c, err
		}),
		gomail.WithTLSConfig(s.tlsConfig()),
		gomail.WithoutNoop(),
	}
	if s.cfg.UseStartTLS {
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	} else {
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	}
	if s.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(s.authType()),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.cfg.Password))
	}
	return opts
}

// authType is AUTH PLAIN, allowed without TLS to a loopback host. go-mail's
// own check takes only the spellings "localhost", "127.0.0.1" and "::1" for
// loopback and would refuse 127.0.0.2 or a written-out ::1, which the boot
// (loopback) lets through; everywhere else without TLS the boot has refused
// the password already, and go-mail's check stays as a second guard.
func (s *smtpSender) authType() gomail.SMTPAuthType {
	if !s.cfg.UseSSL && !s.cfg.UseStartTLS && loopback(s.cfg.Host) {
		return gomail.SMTPAuthPlainNoEnc
	}
	return gomail.SMTPAuthPlain
}

func (s *smtpSender) tlsConfig() *tls.Config {
	return &tls.Config{ServerName: s.cfg.Host, MinVersion: tls.VersionTLS12, RootCAs: s.roots}
}

// dial connects within connect_timeout (go-mail's dial context ctx carries it,
// and ends when go-mail's dial step returns) and wraps the connection in
// per-operation deadlines that also end with the job's context. With use_ssl
// the TLS handshake happens here, within connect_timeout from the dial
// (the connection's deadline), so go-mail sees a *tls.Conn and treats the
// connection as encrypted. It returns the deadline connection (nil when the
// connect failed) and the one go-mail talks over.
func (s *smtpSender) dial(ctx, job context.Context, network, addr string) (*deadlineConn, net.Conn, error) {
	start := time.Now()
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, nil, err
	}
	dc := newDeadlineConn(job, raw, start.Add(s.cfg.ConnectTimeout), s.cfg.CommandTimeout)
	if !s.cfg.UseSSL {
		return dc, dc, nil
	}
	dc.setStep(stepHandshake)
	tc := tls.Client(dc, s.tlsConfig())
	if err := tc.Handshake(); err != nil {
		_ = tc.Close()
		return dc, nil, fmt.Errorf("tls handshake: %w", err)
	}
	dc.setStep(stepGreeting)
	return dc, tc, nil
}

// deadlineConn bounds every Read and Write by its own deadline, which go-mail
// (one deadline for the whole session) cannot: until the server's greeting has
// been read, by connect_timeout from the dial; after it, by command_timeout
// from the start of each operation. Deadlines go-mail sets are ignored. The job
// context ending (job timeout, shutdown) interrupts the operation in flight.
//
// The greeting has been read when go-mail first writes: it writes nothing
// (EHLO is its first command) before its reader has the whole greeting, the
// last line of a multi-line 220 included. Counting bytes instead would end
// the greeting's wait at the first "220" of a greeting cut short, or, with
// use_ssl, at the TLS handshake's first read.
type deadlineConn struct {
	net.Conn
	command time.Duration
	connect time.Time // connect_timeout's deadline, from the dial

	mu        sync.Mutex
	step      step   // what the connection waits for
	writing   bool   // the last operation is a write: the server must take data
	expiry    string // which wait ran out, or the job's context ended, "" while neither
	done      bool
	stopAfter func() bool
}

// step is what a connection waits for; each has its deadline.
type step uint8

const (
	stepGreeting  step = iota // the server's greeting: connect_timeout
	stepHandshake             // the TLS handshake of use_ssl: connect_timeout
	stepCommands              // every read and write after the greeting: command_timeout each
)

func newDeadlineConn(ctx context.Context, c net.Conn, connect time.Time, command time.Duration) *deadlineConn {
	dc := &deadlineConn{Conn: c, command: command, connect: connect}
	dc.stopAfter = context.AfterFunc(ctx, func() {
		dc.mu.Lock()
		if !dc.done {
			dc.done = true
			dc.expiry = jobEnded(ctx, dc.waitingFor())
		}
		dc.mu.Unlock()
		_ = c.SetDeadline(time.Now()) // wake the operation in flight
	})
	return dc
}

// waitingFor names what the connection waits for, as its timeouts do.
// c.mu is held.
func (c *deadlineConn) waitingFor() string {
	switch {
	case c.step == stepHandshake:
		return "the TLS handshake"
	case c.step == stepGreeting:
		return "the greeting"
	case c.writing:
		return "the server to take data"
	}
	return "a reply"
}

func (c *deadlineConn) setStep(s step) {
	c.mu.Lock()
	c.step = s
	c.mu.Unlock()
}

// expired says which wait ran out ("connected, but no greeting within
// connect_timeout") or which the job's context ended ("the job's context
// ended (context deadline exceeded) while waiting for a reply"), or "" when
// neither happened (or c is nil: no connection was made).
func (c *deadlineConn) expired() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expiry
}

func (c *deadlineConn) arm(read bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return net.ErrClosed
	}
	if !read && c.step == stepGreeting {
		c.step = stepCommands // go-mail's first command: the greeting is read
	}
	c.writing = !read
	d := c.connect
	if c.step == stepCommands {
		d = time.Now().Add(c.command)
	}
	if read {
		return c.Conn.SetReadDeadline(d)
	}
	return c.Conn.SetWriteDeadline(d)
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if err := c.arm(true); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.failed(err, true)
	return n, err
}

// failed ends the connection after a timeout: the SMTP dialogue is out of step,
// and go-mail's QUIT on close would otherwise wait another command_timeout. It
// records which wait ran out, unless the job's context ended it (which
// recorded its own).
func (c *deadlineConn) failed(err error, read bool) {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return // the job's context woke the operation, or an earlier timeout
	}
	c.done = true
	switch {
	case c.step == stepHandshake:
		c.expiry = "connected, but no TLS handshake within connect_timeout"
	case c.step == stepGreeting:
		c.expiry = "connected, but no greeting within connect_timeout"
	case read:
		c.expiry = "no reply within command_timeout"
	default:
		c.expiry = "the server took no data within command_timeout"
	}
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.arm(false); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	c.failed(err, false)
	return n, err
}

func (c *deadlineConn) Close() error {
	c.stopAfter()
	return c.Conn.Close()
}

func (c *deadlineConn) SetDeadline(time.Time) error      { return nil }
func (c *deadlineConn) SetReadDeadline(time.Time) error  { return nil }
func (c *deadlineConn) SetWriteDeadline(time.Time) error { return nil }

// DeliveryError is a failed delivery attempt. Code is the SMTP reply code when
// the server answered (0 for a connection that failed or timed out).
type DeliveryError struct {
	// Server is host:port.
	Server string
	// Code is the SMTP reply code (e.g. 451, 550), or 0.
	Code int
	// Err is go-mail's error, carrying the server's reply text; after a
	// timeout, led by the wait that ran out ("no reply within
	// command_timeout: ...").
	Err error
}

func (e *DeliveryError) Error() string {
	kind := "transient"
	if e.Permanent() {
		kind = "permanent"
	}
	if e.Code != 0 {
		return fmt.Sprintf("mail: smtp %s answered %d (%s failure): %v", e.Server, e.Code, kind, e.Err)
	}
	return fmt.Sprintf("mail: smtp %s: %v", e.Server, e.Err)
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// Summary is Error without the server's reply text, which may name recipients:
// what /ready shows.
func (e *DeliveryError) Summary() string {
	if e.Code == 0 {
		// No reply (a timeout, a connection dropped): go-mail's text then
		// ends with the recipients it was sending to, which stay out.
		s := e.Error()
		if i := strings.Index(s, ", affected recipient"); i >= 0 {
			s = s[:i]
		}
		return s
	}
	kind := "transient"
	if e.Permanent() {
		kind = "permanent"
	}
	return fmt.Sprintf("mail: smtp %s answered %d (%s failure)", e.Server, e.Code, kind)
}

// Permanent reports a 5xx reply: retrying cannot change the answer (and
// insisting with a rejected recipient is how a sending domain gets flagged).
func (e *DeliveryError) Permanent() bool { return e.Code >= 500 && e.Code <= 599 }

// classify makes err a DeliveryError; expired, when not empty, says which
// wait of the connection ran out (deadlineConn.expired) and leads the text.
func classify(server string, err error, expired string) *DeliveryError {
	if expired != "" {
		if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(err.Error(), "dial failed: ") {
			// go-mail's "dial" step is the connect and the dialogue up to
			// AUTH: a wait that ran out in it is a connection made and not
			// answered, not a dial that failed.
			err = inner
		}
		err = fmt.Errorf("%s: %w", expired, err)
	}
	return &DeliveryError{Server: server, Code: replyCode(err), Err: err}
}

// replyCode finds the SMTP reply code in go-mail's error: a SendError for the
// MAIL/RCPT/DATA phase, a textproto.Error for the greeting, EHLO, STARTTLS and
// AUTH.
func replyCode(err error) int {
	var se *gomail.SendError
	if errors.As(err, &se) {
		if c := se.ErrorCode(); c != 0 {
			return c
		}
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}
