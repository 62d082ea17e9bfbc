package mail_test

import (
	"context"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// authSession is a scripted session that offers AUTH PLAIN and accepts only
// the password the test sets.
type authSession struct {
	session
	mu       *sync.Mutex
	password *string
}

func (a *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (a *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, _, password string) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if password != *a.password {
			return smtp.ErrAuthFailed // 535 5.7.8
		}
		return nil
	}), nil
}

func TestRejectedCredentialsArePermanent(t *testing.T) {
	t.Parallel()
	s := &scripted{release: make(chan struct{})}
	var mu sync.Mutex
	want := "right-password"
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &authSession{session: session{s: s}, mu: &mu, password: &want}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })

	b := setup(t, config{port: l.Addr().(*net.TCPAddr).Port, maxAttempts: 10,
		mail: "username = \"shop\"\npassword = \"wrong-password\""})
	if err := b.mail.Send(context.Background(), msg("auth")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "delivery dead", func() bool { return len(b.dead(t)) == 1 })
	dead := b.dead(t)[0]
	if dead.Attempts != 1 || !contains(dead.LastError, "535", "permanent") {
		t.Fatalf("dead job after %d attempts, last error %q; want 1 attempt with the 535 reply", dead.Attempts, dead.LastError)
	}
	if strings.Contains(dead.LastError, "wrong-password") || strings.Contains(b.svc.Logs(), "wrong-password") {
		t.Fatal("the password is in the dead job's error or the logs")
	}
	if attempts, _ := s.counts(); attempts != 0 {
		t.Fatalf("server saw %d MAIL commands after a failed AUTH, want 0", attempts)
	}
}
