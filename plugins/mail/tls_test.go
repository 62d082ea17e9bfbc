package mail_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// selfSigned returns a certificate for 127.0.0.1 that no system pool trusts.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestUseSSLHandshakesAndVerifiesTheCertificate(t *testing.T) {
	t.Parallel()
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: &scripted{}}, nil }))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })

	b := setup(t, config{port: l.Addr().(*net.TCPAddr).Port, maxAttempts: 1,
		mail: "use_ssl = true\nuse_starttls = false\nusername = \"u\"\npassword = \"tls-secret\""})
	if err := b.mail.Send(context.Background(), msg("tls")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "delivery dead", func() bool { return len(b.dead(t)) == 1 })
	if le := b.dead(t)[0].LastError; !strings.Contains(le, "certificate") {
		t.Fatalf("last error %q, want a certificate verification failure (implicit TLS, verified)", le)
	}
}

func TestStartTLSIsMandatoryWhenSet(t *testing.T) {
	t.Parallel()
	srv := startScripted(t) // plain SMTP, no STARTTLS offered
	b := setup(t, config{port: srv.port, maxAttempts: 1,
		mail: "use_starttls = true\nusername = \"u\"\npassword = \"starttls-secret\""})
	if err := b.mail.Send(context.Background(), msg("starttls")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "delivery dead", func() bool { return len(b.dead(t)) == 1 })
	if le := b.dead(t)[0].LastError; !strings.Contains(le, "STARTTLS") {
		t.Fatalf("last error %q, want the missing STARTTLS named", le)
	}
	if attempts, n := srv.counts(); attempts != 0 || n != 0 {
		t.Fatalf("server saw %d MAIL commands, %d messages: nothing may be sent without STARTTLS", attempts, n)
	}
}

// tlsServer is the scripted server behind implicit TLS (implicit = true) or
// offering STARTTLS, with a certificate the returned pool trusts.
func tlsServer(t *testing.T, implicit bool) (*scripted, *x509.CertPool) {
	t.Helper()
	cert := selfSigned(t)
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	s := &scripted{release: make(chan struct{})}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	var l net.Listener
	if implicit {
		l, err = tls.Listen("tcp", "127.0.0.1:0", cfg)
	} else {
		srv.TLSConfig = cfg
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	return s, roots
}

func TestDeliveryOverTLS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		implicit bool
		mail     string
	}{
		{"use_ssl", true, "use_ssl = true\nuse_starttls = false"},
		{"use_starttls", false, "use_starttls = true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, roots := tlsServer(t, c.implicit)
			b := setup(t, config{port: srv.port, roots: roots, maxAttempts: 1, mail: c.mail + "\ncommand_timeout = \"5s\""})
			if err := b.mail.Send(context.Background(), msg(c.name)); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "delivered over TLS", func() bool { _, n := srv.counts(); return n == 1 })
			if !strings.Contains(srv.messages()[0].data, "hello "+c.name) {
				t.Fatalf("delivered %q", srv.messages()[0].data)
			}
		})
	}
}
