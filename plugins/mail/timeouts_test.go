package mail_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/jfastframework/jfast/plugins/mail"
)

// stalling starts a server that accepts connections, completes a TLS
// handshake first when cfg is not nil (implicit TLS, as port 465), writes say
// and then says nothing more until the test ends: a hung SMTP server, or a
// TLS terminator in front of one. It returns the port.
func stalling(t *testing.T, cfg *tls.Config, say string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if cfg != nil {
				c = tls.Server(c, cfg)
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() != nil {
					return
				}
				_, _ = c.Write([]byte(say))
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port
}

// serverTLS is a TLS configuration with a self-signed certificate for
// 127.0.0.1, and the pool that trusts it.
func serverTLS(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	cert := selfSigned(t)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	return &tls.Config{Certificates: []tls.Certificate{cert}}, roots
}

// Until the whole greeting has been read, connect_timeout (0.3 s) bounds the
// wait, not command_timeout (6 s): after a TLS handshake that succeeded
// (use_ssl, the handshake's reads are not the greeting), after the first
// bytes of a greeting without their line end, after the first line of a
// multi-line greeting; and a TLS handshake the server never answers. The
// error names the step that was not answered.
func TestGreetingIsBoundedByConnectTimeout(t *testing.T) {
	t.Parallel()
	cfg, roots := serverTLS(t)
	const timeouts = "connect_timeout = \"300ms\"\ncommand_timeout = \"6s\"\n"
	const ssl = "use_ssl = true\nuse_starttls = false\n"
	for _, tc := range []struct {
		name string
		port func(t *testing.T) int
		mail string
		want string
	}{
		{"use_ssl, handshake done, no greeting", func(t *testing.T) int { return stalling(t, cfg, "") }, ssl,
			"connected, but no greeting within connect_timeout"},
		{"use_ssl, greeting cut after 220", func(t *testing.T) int { return stalling(t, cfg, "220") }, ssl,
			"connected, but no greeting within connect_timeout"},
		{"greeting cut after 220", func(t *testing.T) int { return stalling(t, nil, "220") }, "",
			"connected, but no greeting within connect_timeout"},
		{"greeting cut after its first line", func(t *testing.T) int { return stalling(t, nil, "220-mx.example.com\r\n") }, "",
			"connected, but no greeting within connect_timeout"},
		{"use_ssl, no handshake", silent, ssl,
			"connected, but no TLS handshake within connect_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, config{port: tc.port(t), roots: roots, maxAttempts: 1, mail: timeouts + tc.mail})
			last := hungDelivery(t, b)
			if last.Seconds < 0.3 || last.Seconds > 3 {
				t.Errorf("attempt took %.2fs, want about connect_timeout (0.3s), not command_timeout (6s)", last.Seconds)
			}
			if !strings.Contains(last.Error, tc.want) || strings.Contains(last.Error, "dial failed") {
				t.Errorf("last error %q, want it to say %q", last.Error, tc.want)
			}
		})
	}
}

// Once the greeting has been read, command_timeout (1 s) bounds each reply,
// go-mail's dial step (EHLO, STARTTLS, AUTH) included, and the error says a
// reply, not the greeting, was missing.
func TestNoReplyAfterTheGreetingIsBoundedByCommandTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, config{port: stalling(t, nil, "220 mx.example.com ready\r\n"), maxAttempts: 1,
		mail: "connect_timeout = \"300ms\"\ncommand_timeout = \"1s\""})
	last := hungDelivery(t, b)
	if last.Seconds < 1 || last.Seconds > 4 {
		t.Errorf("attempt took %.2fs, want about command_timeout (1s)", last.Seconds)
	}
	if !strings.Contains(last.Error, "no reply within command_timeout") || strings.Contains(last.Error, "greeting") {
		t.Errorf("last error %q, want it to say no reply came within command_timeout (the greeting came)", last.Error)
	}
}

// When the job's context ends (job_timeout, or a shutdown) while the
// attempt waits, the error names the wait, as a timeout's does; the
// connection's own timeouts (60 s) are far off. Before, it named none, and
// said "dial failed" for a connection that was made. (A write the server
// takes no data for is TestAWriteTheServerTakesNoDataForNamesItsWait's.)
func TestTheJobsEndNamesTheWait(t *testing.T) {
	t.Parallel()
	const timeouts = "connect_timeout = \"60s\"\ncommand_timeout = \"60s\"\n"
	small := func(*testing.T) mail.Message { return msg("hung") }
	for _, tc := range []struct {
		name    string
		port    func(t *testing.T) int
		mail    string
		message func(t *testing.T) mail.Message
		job     string
		want    string
	}{
		{"no greeting", silent, "", small, "500ms", "while waiting for the greeting"},
		{"use_ssl, no handshake", silent, "use_ssl = true\nuse_starttls = false\n", small, "500ms", "while waiting for the TLS handshake"},
		{"no reply to EHLO", func(t *testing.T) int { return stalling(t, nil, "220 mx.example.com ready\r\n") }, "", small, "500ms",
			"while waiting for a reply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, config{port: tc.port(t), maxAttempts: 1, mail: timeouts + tc.mail,
				queue: "job_timeout = \"" + tc.job + "\"\n"})
			last := hungDeliveryOf(t, b, tc.message(t))
			if last.Seconds > 30 {
				t.Errorf("attempt took %.2fs, want it ended by job_timeout (%s), not a connection timeout (60s)", last.Seconds, tc.job)
			}
			want := "the job's context ended (job mail.send exceeded its timeout of " + tc.job + ") " + tc.want
			if !strings.Contains(last.Error, want) || strings.Contains(last.Error, "dial failed") {
				t.Errorf("last error %q, want it to say %q", last.Error, want)
			}
		})
	}
}
