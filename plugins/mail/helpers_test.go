package mail_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
)

// bundle is what setup gives a test: the started service, its mail and queue
// plugins and the test's own queue.
type bundle struct {
	svc   *jfasttest.Service
	mail  *mail.Plugin
	queue *queue.Plugin
	name  string // the test's queue
}

// config is what a test sets about the App; empty fields take the defaults
// below (short retry delays so retries are quick, not skipped).
type config struct {
	transport   string // default "smtp"
	host        string // default "127.0.0.1"
	routes      func(app *framework.App, r chi.Router) error
	port        int
	mail        string // extra [plugin.mail] lines
	queue       string // extra [plugin.queue] lines
	maxAttempts int
	roots       *x509.CertPool // trusted roots for TLS tests
	db          string         // database URL; default the private test database
}

func setup(t *testing.T, c config) *bundle {
	t.Helper()
	name := "mail_" + randHex(5)
	if c.maxAttempts == 0 {
		c.maxAttempts = 5
	}
	if c.transport == "" {
		c.transport = "smtp"
	}
	if c.db == "" {
		c.db = dbURL()
	}
	if c.host == "" {
		c.host = "127.0.0.1"
	}
	starttls := "use_starttls = false" // the test servers speak plain SMTP
	if strings.Contains(c.mail, "use_starttls") {
		starttls = ""
	}
	toml := fmt.Sprintf(`[plugins]
enabled = ["observability", "db", "queue", "mail"]

[plugin.db]
url = %q

[plugin.queue]
backend = "postgres"
retry_base = "50ms"
retry_max = "200ms"
poll_interval = "100ms"
attempts = %d
%s
[plugin.queue.queues.%s]
concurrency = 2

[plugin.mail]
transport = %q
host = %q
port = %d
%s
from = "Shop <shop@example.com>"
queue = %q
%s
`, c.db, c.maxAttempts, c.queue, name, c.transport, c.host, c.port, starttls, name, c.mail)
	m, q := mail.New(), queue.New()
	if c.roots != nil {
		mail.SetRootCAs(m, c.roots)
	}
	svc := jfasttest.Start(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{db.New(), q, m}, Routes: c.routes})
	return &bundle{svc: svc, mail: m, queue: q, name: name}
}

// dead lists the test queue's dead letter.
func (b *bundle) dead(t *testing.T) []queue.DeadJob {
	t.Helper()
	jobs, err := b.queue.DeadJobs(context.Background(), queue.DeadQuery{Queue: b.name})
	if err != nil {
		t.Fatalf("dead jobs: %v", err)
	}
	return jobs
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// eventually polls cond every 20 ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scripted is an in-process SMTP server (emersion/go-smtp) whose answers a test
// scripts: MAIL FROM and RCPT TO replies per attempt, and a DATA that hangs.
type scripted struct {
	srv  *smtp.Server
	port int

	mu        sync.Mutex
	mailFrom  func(attempt int) error // nil: accept
	rcpt      func(attempt int) error // nil: accept
	hangData  bool
	attempts  int // MAIL FROM commands seen
	delivered []delivered
	release   chan struct{}
}

type delivered struct {
	from string
	to   []string
	data string
}

func startScripted(t *testing.T) *scripted {
	t.Helper()
	return serveScripted(t, "127.0.0.1:0", func(s *scripted) smtp.Session { return &session{s: s} })
}

// serveScripted starts a scripted server listening on addr whose sessions
// newSession makes (a session with more commands, such as AUTH, embeds
// session).
func serveScripted(t *testing.T, addr string, newSession func(s *scripted) smtp.Session) *scripted {
	t.Helper()
	s := &scripted{release: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return newSession(s), nil
	}))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	served := make(chan struct{})
	go func() { defer close(served); _ = s.srv.Serve(l) }()
	t.Cleanup(func() {
		s.mu.Lock()
		select {
		case <-s.release:
		default:
			close(s.release)
		}
		s.mu.Unlock()
		_ = s.srv.Close()
		<-served
	})
	return s
}

func (s *scripted) script(f func(s *scripted)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *scripted) counts() (attempts, delivered int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, len(s.delivered)
}

func (s *scripted) messages() []delivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivered(nil), s.delivered...)
}

type session struct {
	s    *scripted
	from string
	to   []string
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	x.s.attempts++
	if x.s.mailFrom != nil {
		if err := x.s.mailFrom(x.s.attempts); err != nil {
			return err
		}
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	if x.s.rcpt != nil {
		if err := x.s.rcpt(x.s.attempts); err != nil {
			return err
		}
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	x.s.mu.Lock()
	hang, release := x.s.hangData, x.s.release
	x.s.mu.Unlock()
	if hang {
		<-release // never answer the end of DATA until the test ends
		return errors.New("released")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	x.s.delivered = append(x.s.delivered, delivered{from: x.from, to: x.to, data: string(b)})
	x.s.mu.Unlock()
	return nil
}

func reply(code int, enhanced smtp.EnhancedCode, msg string) error {
	return &smtp.SMTPError{Code: code, EnhancedCode: enhanced, Message: msg}
}

// silent is a TCP server that accepts connections and never says a word (a
// hung SMTP server before its greeting); it returns the port.
func silent(t *testing.T) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(jfasttest.SilentServer(t))
	n, _ := strconv.Atoi(port)
	return n
}

func msg(subject string) mail.Message {
	return mail.Message{To: []string{"ada@example.com"}, Subject: subject, Text: "hello " + subject}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// closedPort returns a loopback port where connections are refused until the
// test ends (jfasttest.RefusedAddr: the port is held, so no other test's
// server on 127.0.0.1:0 can take it and turn each refused attempt into a
// wait of connect_timeout).
func closedPort(t *testing.T) int {
	t.Helper()
	_, port, err := net.SplitHostPort(jfasttest.RefusedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
