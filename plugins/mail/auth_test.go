package mail_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// authSession is a scripted session that offers AUTH PLAIN and accepts only
// password.
type authSession struct {
	session
	password string
}

func (a *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (a *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, _, password string) error {
		if password != a.password {
			return smtp.ErrAuthFailed // 535 5.7.8
		}
		return nil
	}), nil
}

// startAuth starts a scripted server on addr that asks for AUTH PLAIN with
// password, over plain SMTP.
func startAuth(t *testing.T, addr, password string) *scripted {
	t.Helper()
	return serveScripted(t, addr, func(s *scripted) smtp.Session {
		return &authSession{session: session{s: s}, password: password}
	})
}

func TestRejectedCredentialsArePermanent(t *testing.T) {
	t.Parallel()
	s := startAuth(t, "127.0.0.1:0", "right-password")
	b := setup(t, config{port: s.port, maxAttempts: 10,
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

// A password goes in clear to any loopback address, not only to the three
// spellings the SMTP library knows: the boot lets 127.0.0.2 through (it is
// loopback), and the delivery authenticates there and is delivered, once.
func TestPasswordInClearToAnyLoopbackAddress(t *testing.T) {
	t.Parallel()
	s := startAuth(t, "127.0.0.2:0", "right-password")
	b := setup(t, config{host: "127.0.0.2", port: s.port, maxAttempts: 1,
		mail: "username = \"shop\"\npassword = \"right-password\""})
	if err := b.mail.Send(context.Background(), msg("loopback")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the message delivered, or the job dead", func() bool {
		_, n := s.counts()
		return n == 1 || len(b.dead(t)) > 0
	})
	if dead := b.dead(t); len(dead) > 0 {
		t.Fatalf("delivery to 127.0.0.2 dead: %s", dead[0].LastError)
	}
}
