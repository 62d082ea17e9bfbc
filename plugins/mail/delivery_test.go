package mail_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/jfastframework/jfast/plugins/mail"
)

func TestTransientRepliesAreRetriedThenDelivered(t *testing.T) {
	t.Parallel()
	srv := startScripted(t)
	srv.script(func(s *scripted) {
		s.rcpt = func(attempt int) error {
			if attempt <= 2 {
				return reply(451, smtp.EnhancedCode{4, 7, 1}, "greylisted, try again later")
			}
			return nil
		}
	})
	b := setup(t, config{port: srv.port})
	if err := b.mail.Send(context.Background(), msg("transient")); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Log(b.svc.Logs())
		}
	}()
	eventually(t, 20*time.Second, "message delivered after two 451 replies", func() bool {
		_, n := srv.counts()
		return n == 1
	})
	if attempts, _ := srv.counts(); attempts != 3 {
		t.Log(b.svc.Logs())
		t.Fatalf("server saw %d attempts, want 3 (two 451, then accepted)", attempts)
	}
	if d := b.dead(t); len(d) != 0 {
		t.Fatalf("dead letter = %+v, want empty", d)
	}
	eventually(t, 5*time.Second, "last delivery recorded as sent", func() bool {
		last, ok := b.mail.LastDelivery()
		return ok && last.Result == "sent"
	})
	metrics := b.svc.Get(t, "/metrics").String()
	if !contains(metrics, `jfast_mail_deliveries_total{result="transient",transport="smtp"} 2`, `jfast_mail_deliveries_total{result="sent",transport="smtp"} 1`,
		`jfast_mail_delivery_duration_seconds_count{transport="smtp"} 3`) {
		t.Errorf("metrics lack the delivery counts and the three attempts timed:\n%s", metrics)
	}
	got := srv.messages()[0]
	if got.from != "shop@example.com" || len(got.to) != 1 || got.to[0] != "ada@example.com" || !strings.Contains(got.data, "hello transient") {
		t.Fatalf("delivered %+v", got)
	}
}

func TestPermanentRepliesGoStraightToTheDeadLetterAndCanBeResent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		script func(s *scripted)
		want   string
	}{
		{"rejected recipient", func(s *scripted) {
			s.rcpt = func(int) error { return reply(550, smtp.EnhancedCode{5, 1, 1}, "no such user here") }
		}, "550"},
		{"bad sender", func(s *scripted) {
			s.mailFrom = func(int) error { return reply(553, smtp.EnhancedCode{5, 1, 8}, "sender domain does not exist") }
		}, "553"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := startScripted(t)
			srv.script(c.script)
			b := setup(t, config{port: srv.port, maxAttempts: 10})
			if err := b.mail.Send(context.Background(), msg(c.name)); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "delivery in the dead letter", func() bool { return len(b.dead(t)) == 1 })
			dead := b.dead(t)[0]
			if dead.Kind != mail.JobKind || dead.Attempts != 1 {
				t.Fatalf("dead job kind %q attempts %d, want %q after 1 attempt (no retry of a 5xx)", dead.Kind, dead.Attempts, mail.JobKind)
			}
			if !contains(dead.LastError, c.want, "permanent") {
				t.Fatalf("dead job's last error %q does not carry the SMTP reply %s", dead.LastError, c.want)
			}
			if attempts, n := srv.counts(); attempts != 1 || n != 0 {
				t.Fatalf("server saw %d attempts and %d messages, want 1 attempt and none", attempts, n)
			}

			// /ready: the last delivery and the dead-letter count, not a failure
			// (the server answered; the message was at fault).
			r := ready(t, b)
			if !r.Healthy || r.Critical || r.Meta["dead"] != float64(1) {
				t.Fatalf("/ready mail = %+v, want healthy with dead = 1", r)
			}
			last := r.Meta["last_delivery"].(map[string]any)
			if last["result"] != "permanent" || !strings.Contains(last["error"].(string), c.want) || strings.Contains(last["error"].(string), "ada@example.com") {
				t.Fatalf("/ready last_delivery = %v, want permanent with the code and no recipient", last)
			}

			// The cause is fixed; the dead job is resent and delivered.
			srv.script(func(s *scripted) { s.rcpt, s.mailFrom = nil, nil })
			if err := b.queue.RetryDead(context.Background(), dead.ID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "resent message delivered", func() bool {
				_, n := srv.counts()
				return n == 1
			})
			if d := b.dead(t); len(d) != 0 {
				t.Fatalf("dead letter after resend = %+v, want empty", d)
			}
		})
	}
}

func TestConnectionRefusedIsRetriedUntilTheDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, config{port: closedPort(t), maxAttempts: 3})
	if err := b.mail.Send(context.Background(), msg("refused")); err != nil {
		t.Fatalf("Send with the SMTP server down = %v, want nil (mail waits in the queue)", err)
	}
	eventually(t, 20*time.Second, "delivery dead after 3 attempts", func() bool { return len(b.dead(t)) == 1 })
	dead := b.dead(t)[0]
	if dead.Attempts != 3 || !strings.Contains(dead.LastError, "connection refused") || strings.Contains(dead.LastError, "permanent") {
		t.Fatalf("dead job = %+v, want 3 attempts ending with connection refused", dead)
	}
	r := ready(t, b)
	if r.Healthy || !strings.Contains(r.Detail, "connection refused") || r.Meta["dead"] != float64(1) {
		t.Fatalf("/ready mail = %+v, want unhealthy naming the refusal, dead = 1", r)
	}
	// Not critical unless [plugin.mail] critical = true: the service stays ready.
	if resp := b.svc.Get(t, "/ready"); resp.Status != 200 {
		t.Fatalf("/ready status %d, want 200 (degraded): %s", resp.Status, resp.Body)
	}
}

func TestReadyIsUnavailableOnlyWhenMailIsDeclaredCritical(t *testing.T) {
	t.Parallel()
	b := setup(t, config{port: closedPort(t), maxAttempts: 1, mail: "critical = true"})
	if resp := b.svc.Get(t, "/ready"); resp.Status != 200 {
		t.Fatalf("/ready before any delivery = %d, want 200: %s", resp.Status, resp.Body)
	}
	if err := b.mail.Send(context.Background(), msg("critical")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "delivery dead", func() bool { return len(b.dead(t)) == 1 })
	if resp := b.svc.Get(t, "/ready"); resp.Status != 503 {
		t.Fatalf("/ready with critical = true after a refused delivery = %d, want 503: %s", resp.Status, resp.Body)
	}
}

func TestHungServerIsBoundedByTheTimeouts(t *testing.T) {
	t.Parallel()
	t.Run("no greeting: connect_timeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t, config{port: silent(t), maxAttempts: 1,
			mail: "connect_timeout = \"300ms\"\ncommand_timeout = \"30s\""})
		last := hungDelivery(t, b)
		if last.Seconds < 0.3 || last.Seconds > 3 {
			t.Fatalf("attempt took %.2fs, want about connect_timeout (0.3s)", last.Seconds)
		}
		if !strings.Contains(last.Error, "connected, but no greeting") || strings.Contains(last.Error, "dial failed") {
			t.Fatalf("last error %q, want it to say the connection was made and not greeted", last.Error)
		}
	})
	t.Run("no reply to DATA: command_timeout", func(t *testing.T) {
		t.Parallel()
		srv := startScripted(t)
		srv.script(func(s *scripted) { s.hangData = true })
		b := setup(t, config{port: srv.port, maxAttempts: 1,
			mail: "connect_timeout = \"30s\"\ncommand_timeout = \"300ms\""})
		last := hungDelivery(t, b)
		if last.Seconds < 0.3 || last.Seconds > 3 {
			t.Fatalf("attempt took %.2fs, want about command_timeout (0.3s)", last.Seconds)
		}
		if attempts, n := srv.counts(); attempts != 1 || n != 0 {
			t.Fatalf("server saw %d attempts, %d messages; want 1 and 0", attempts, n)
		}
	})
}

// hungDelivery sends one message to a server that stops answering and waits
// for the attempt to fail with a timeout (transient: with attempts = 1 it
// lands in the dead letter).
func hungDelivery(t *testing.T, b *bundle) mail.Delivery {
	t.Helper()
	return hungDeliveryOf(t, b, msg("hung"))
}

// hungDeliveryOf is hungDelivery of the message m.
func hungDeliveryOf(t *testing.T, b *bundle, m mail.Message) mail.Delivery {
	t.Helper()
	if err := b.mail.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "hung delivery dead", func() bool { return len(b.dead(t)) == 1 })
	last, ok := b.mail.LastDelivery()
	if !ok || last.Result != "transient" || !strings.Contains(last.Error, "timeout") {
		t.Fatalf("last delivery = %+v, want a transient timeout", last)
	}
	t.Logf("hung attempt failed after %.3fs: %s", last.Seconds, last.Error)
	return last
}

type report struct {
	Healthy  bool           `json:"healthy"`
	Critical bool           `json:"critical"`
	Detail   string         `json:"detail"`
	Meta     map[string]any `json:"meta"`
}

// ready returns the mail entry of /ready.
func ready(t *testing.T, b *bundle) report {
	t.Helper()
	resp := b.svc.Get(t, "/ready")
	var body struct {
		Checks map[string]report `json:"checks"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("/ready body %s: %v", resp.Body, err)
	}
	r, ok := body.Checks["mail"]
	if !ok {
		t.Fatalf("/ready has no mail check: %s", resp.Body)
	}
	return r
}

var _ = errors.New
