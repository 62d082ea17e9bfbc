package mail

import (
	"fmt"
	"net/mail"
	"net/netip"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework"
)

// Config is the [plugin.mail] table.
type Config struct {
	// Transport is how delivery jobs send a message: "smtp" (to host:port) or
	// "log" (the message is written to the log, for development). Either way
	// Send goes through the queue. Defaults to "log".
	Transport string `koanf:"transport"`

	// Host is the SMTP server's host name or address. Defaults to "localhost".
	Host string `koanf:"host"`

	// Port is the SMTP server's port, 1–65535 (587 is submission with STARTTLS,
	// 465 implicit TLS, 25 relay). Defaults to 587.
	Port int `koanf:"port"`

	// Username authenticates with SMTP AUTH PLAIN when set; the password is
	// sent only over TLS or to a loopback server. A deploy key
	// (JFAST_MAIL_USERNAME). Defaults to "".
	Username string `koanf:"username"`

	// Password goes with Username. A deploy key (JFAST_MAIL_PASSWORD); it never
	// appears in a log line, an error or /ready. Defaults to "".
	Password string `koanf:"password"`

	// UseSSL connects with implicit TLS (port 465). Cannot be combined with
	// use_starttls. Defaults to false.
	UseSSL bool `koanf:"use_ssl"`

	// UseStartTLS upgrades the connection with STARTTLS and refuses to send when
	// the server does not offer it. Cannot be combined with use_ssl.
	// Defaults to true.
	UseStartTLS bool `koanf:"use_starttls"`

	// ConnectTimeout bounds the TCP connect, the TLS handshake (use_ssl) and the
	// server's whole greeting, from the dial. Defaults to 10s.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`

	// CommandTimeout bounds every read and write after the greeting: one SMTP
	// command and its reply, or one chunk of the message body. Defaults to 30s.
	CommandTimeout time.Duration `koanf:"command_timeout"`

	// From is the sender of messages that do not set their own, e.g.
	// "Shop <orders@example.com>". With app.env = "production" it must be a
	// valid address; elsewhere it may be empty (then every Message must set
	// From). Defaults to "".
	From string `koanf:"from"`

	// ReplyTo is the Reply-To of messages that do not set their own.
	// Defaults to "".
	ReplyTo string `koanf:"reply_to"`

	// Queue is the queue delivery jobs go to; the queue plugin must work it
	// ([plugin.queue.queues.<name>]). Empty means the queue plugin's default
	// queue. Defaults to "".
	Queue string `koanf:"queue"`
}

// DefaultConfig returns the configuration defaults.
func DefaultConfig() Config {
	return Config{
		Transport:      "log",
		Host:           "localhost",
		Port:           587,
		UseStartTLS:    true,
		ConnectTimeout: 10 * time.Second,
		CommandTimeout: 30 * time.Second,
	}
}

func (c *Config) validate(v *framework.Validation) {
	if c.Transport != "smtp" && c.Transport != "log" {
		v.Error("transport", fmt.Sprintf("unknown transport %q", c.Transport), `set transport = "smtp" or "log"`)
	}
	if c.Port < 1 || c.Port > 65535 {
		// port and from are deploy keys: their values are not quoted.
		v.Error("port", "must be a TCP port from 1 to 65535", "set port = 587 (STARTTLS), 465 (use_ssl) or 25")
	}
	if c.UseSSL && c.UseStartTLS {
		v.Error("use_starttls", "use_ssl and use_starttls are both true; a connection is either TLS from the start or upgraded with STARTTLS",
			"set use_ssl = true for port 465 (and use_starttls = false), or use_starttls = true for port 587")
	}
	switch {
	case c.Transport == "smtp" && c.Host == "":
		v.Error("host", "is empty", `set host = "smtp.example.com"`)
	case c.Transport == "smtp" && !v.IsSet("host"):
		// The default (localhost) is only a place holder for the log
		// transport: mail sent to a server nobody chose fails at the first
		// message, long after the boot.
		v.Error("host", `is not set, and transport = "smtp" sends every message to it`, `set host = "smtp.example.com" (or JFAST_MAIL_HOST), or transport = "log" in development`)
	}
	v.Deadline("connect_timeout", c.ConnectTimeout)
	v.Deadline("command_timeout", c.CommandTimeout)
	switch {
	case c.From != "":
		if _, err := mail.ParseAddress(c.From); err != nil {
			// Not the parser's message either: it may quote the value.
			v.Error("from", "is not one email address", `set from = "orders@example.com" or "Shop <orders@example.com>"`)
		}
	case v.Production():
		v.Error("from", "is empty; in production every message needs a valid sender", `set from = "Shop <orders@example.com>" (or JFAST_MAIL_FROM)`)
	}
	if c.ReplyTo != "" {
		if _, err := mail.ParseAddress(c.ReplyTo); err != nil {
			v.Error("reply_to", fmt.Sprintf("%q is not an email address: %v", c.ReplyTo, err), `set reply_to = "support@example.com" or remove it`)
		}
	}
	if c.Queue != "" && !framework.ValidName(c.Queue) {
		problem, fix := framework.NameRefusal("queue", c.Queue, "it names the queue of mail's jobs; empty is the queue plugin's default queue")
		v.Error("queue", fmt.Sprintf("%q %s", c.Queue, problem), fix)
	}
	if c.Transport == "smtp" && c.Username != "" && !c.UseSSL && !c.UseStartTLS && !loopback(c.Host) {
		v.Error("username", "would send the password in clear text: neither use_ssl nor use_starttls is set and the host is not loopback",
			"set use_starttls = true (port 587) or use_ssl = true (port 465)")
	}
}

// loopback reports whether host is this machine, where SMTP AUTH PLAIN without
// TLS is allowed: "localhost", or a loopback address in any form (all of
// 127.0.0.0/8, ::1 written out, an IPv4-mapped 127.x). The name is never
// resolved: a name that resolves to loopback today may not tomorrow.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
