package mail

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/readiness"
)

// unansweredQueue is a queue whose dead-letter count answers only when its
// context ends (a database that has not answered yet: tables being migrated
// at boot, a busy server, a hang its breaker does not know about yet).
type unansweredQueue struct{ framework.Jobs }

func (unansweredQueue) CountDeadJobs(ctx context.Context, _ string) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// TestCheckAnswersWhenTheDeadLetterCountDoesNot: a queue that does not answer
// the count in time costs the "dead" entry, not the check: /ready reports the
// last delivery (critical = true, so a timeout would make it 503), as
// docs/mail.md says.
func TestCheckAnswersWhenTheDeadLetterCountDoesNot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		last       *Delivery
		status     readiness.Status
		overall    readiness.Overall
		detailHead string
	}{
		{"before any delivery", nil, readiness.Pass, readiness.OK, "no delivery attempted yet"},
		{"after a refused delivery", &Delivery{Result: "transient", Error: "mail: smtp 127.0.0.1:2525: dial failed: connection refused"},
			readiness.Fail, readiness.Unavailable, "last delivery failed: mail: smtp 127.0.0.1:2525: dial failed: connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := New()
			p.cfg.Transport, p.cfg.Host, p.cfg.Port = "smtp", "127.0.0.1", 2525
			p.sender = &smtpSender{cfg: p.cfg}
			p.jobs = unansweredQueue{}
			p.last = c.last
			agg := readiness.NewAggregator(readiness.DefaultTimeout, readiness.Check{Name: Name, Critical: true, Run: p.Check})
			res := agg.Run(context.Background())
			r := res.Checks[Name]
			if r.Status != c.status || res.Status != c.overall {
				t.Fatalf("mail check %s (%q), /ready %s; want %s and %s, not a timeout", r.Status, r.Detail, res.Status, c.status, c.overall)
			}
			if want := c.detailHead + "; dead letter unknown: the queue did not answer"; r.Detail != want {
				t.Fatalf("detail %q, want %q", r.Detail, want)
			}
			if _, ok := r.Meta["dead"]; ok || !strings.Contains(r.Meta["server"].(string), "127.0.0.1:2525") {
				t.Fatalf("meta %v, want the server and no dead count", r.Meta)
			}
		})
	}
}

// lateQueue is a queue whose dead-letter count returns when the test lets it,
// whatever its context says: a count that notices its deadline late, or a
// backend that read its rows in time and decodes them after (a dead mail
// with attachments is megabytes of JSON).
type lateQueue struct {
	framework.Jobs
	release chan struct{}
	calls   atomic.Int32
}

func (q *lateQueue) CountDeadJobs(context.Context, string) (int, error) {
	q.calls.Add(1)
	<-q.release
	return 3, nil
}

// TestCheckDoesNotWaitForALateDeadLetterCount: a count that does not return
// by its deadline costs the "dead" entry, not the check (critical = true, so
// a timeout would make /ready 503), as docs/mail.md says; a later check
// shares the count still running instead of starting another, and takes its
// answer once it comes.
func TestCheckDoesNotWaitForALateDeadLetterCount(t *testing.T) {
	t.Parallel()
	q := &lateQueue{release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(q.release)
		}
	}()
	p := New()
	p.cfg.Transport = "log"
	p.jobs = q
	agg := readiness.NewAggregator(readiness.DefaultTimeout, readiness.Check{Name: Name, Critical: true, Run: p.Check})
	for i := range 2 {
		res := agg.Run(context.Background())
		r := res.Checks[Name]
		if r.Status != readiness.Pass || res.Status != readiness.OK {
			t.Fatalf("check %d: mail check %s (%q), /ready %s; want passed and ok, not a timeout", i+1, r.Status, r.Detail, res.Status)
		}
		if want := "no delivery attempted yet; dead letter unknown: the queue did not answer"; r.Detail != want {
			t.Fatalf("check %d: detail %q, want %q", i+1, r.Detail, want)
		}
	}
	if n := q.calls.Load(); n != 1 {
		t.Fatalf("the queue was asked for %d counts while the first had not returned; want 1, shared", n)
	}
	close(q.release)
	released = true
	r := agg.Run(context.Background()).Checks[Name]
	if r.Status != readiness.Pass || r.Meta["dead"] != 3 || r.Detail != "no delivery attempted yet; 3 in the dead letter" {
		t.Fatalf("after the count returned: mail check %s (%q), meta %v; want passed with dead = 3", r.Status, r.Detail, r.Meta)
	}
}

// A failure with no reply code (a timeout, a dropped connection) is shown
// without the recipients go-mail's text ends with.
func TestSummaryWithoutAReplyLeavesTheRecipientsOut(t *testing.T) {
	t.Parallel()
	e := &DeliveryError{Server: "127.0.0.1:2525", Err: errors.New("send failed: sending SMTP RCPT TO command: EOF, affected recipient(s): <secret.person@example.com>, affected message ID: 123@x")}
	got := e.Summary()
	if strings.Contains(got, "secret.person") || got != "mail: smtp 127.0.0.1:2525: send failed: sending SMTP RCPT TO command: EOF" {
		t.Fatalf("Summary() = %q, want the failure without the recipients", got)
	}
}
