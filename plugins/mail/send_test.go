package mail_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/problem"
)

func TestSendRefusesAnInvalidMessageAndEnqueuesNothing(t *testing.T) {
	t.Parallel()
	srv := startScripted(t)
	var m *mail.Plugin
	b := setup(t, config{port: srv.port, routes: func(app *framework.App, r chi.Router) error {
		r.Method(http.MethodPost, "/signup", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			if err := m.Send(r.Context(), mail.Message{To: []string{"not an address"}, Subject: "Welcome"}); err != nil {
				return err
			}
			w.WriteHeader(http.StatusAccepted)
			return nil
		}))
		var err error
		m, err = mail.From(app)
		return err
	}})
	ok := msg("valid")
	cases := []struct {
		name   string
		edit   func(m *mail.Message)
		fields []string
	}{
		{"no recipient", func(m *mail.Message) { m.To = nil }, []string{"to"}},
		{"bad recipient", func(m *mail.Message) { m.To = []string{"ada@example.com", "ada at example"}; m.Bcc = []string{"@"} }, []string{"to[1]", "bcc[0]"}},
		{"bad sender", func(m *mail.Message) { m.From = "shop" }, []string{"from"}},
		{"bad reply-to", func(m *mail.Message) { m.ReplyTo = "help" }, []string{"reply_to"}},
		{"no subject", func(m *mail.Message) { m.Subject = " " }, []string{"subject"}},
		{"two-line subject", func(m *mail.Message) { m.Subject = "a\r\nBcc: x@example.com" }, []string{"subject"}},
		{"no body", func(m *mail.Message) { m.Text, m.HTML = "", "" }, []string{"text"}},
		{"attachment without name", func(m *mail.Message) { m.Attachments = []mail.Attachment{{Data: []byte("x")}} }, []string{"attachments[0].filename"}},
		{"address header", func(m *mail.Message) { m.Headers = map[string]string{"Bcc": "x@example.com"} }, []string{"headers.Bcc"}},
		{"too large", func(m *mail.Message) {
			m.Attachments = []mail.Attachment{{Filename: "big.bin", Data: make([]byte, mail.MaxMessageBytes)}}
		}, []string{"attachments"}},
	}
	for _, c := range cases {
		m := ok
		c.edit(&m)
		err := b.mail.Send(context.Background(), m)
		var ie *mail.InvalidMessageError
		if !errors.As(err, &ie) {
			t.Fatalf("%s: Send = %v, want *InvalidMessageError", c.name, err)
		}
		var got []string
		for _, f := range ie.Fields {
			got = append(got, f.Field)
		}
		if strings.Join(got, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: invalid fields %v, want %v", c.name, got, c.fields)
		}
		if p := problem.From(err); p.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: problem status %d, want 422", c.name, p.Status)
		}
	}

	// Through a handler: a 422 problem listing the fields.
	resp := b.svc.Do(t, http.MethodPost, "/signup", "")
	var body struct {
		Status int                  `json:"status"`
		Errors []problem.FieldError `json:"errors"`
	}
	_ = json.Unmarshal(resp.Body, &body)
	if resp.Status != 422 || len(body.Errors) != 2 || body.Errors[0].Field != "to[0]" || body.Errors[1].Field != "text" {
		t.Fatalf("POST /signup = %d %s, want 422 naming to[0] and text", resp.Status, resp.Body)
	}

	// Nothing reached the queue.
	stats, err := b.queue.Backend().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Depth[b.name] != 0 {
		t.Fatalf("queue depth %d after refused sends, want 0", stats.Depth[b.name])
	}
	// The valid message goes through.
	if err := b.mail.Send(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "valid message delivered", func() bool { _, n := srv.counts(); return n == 1 })
	if attempts, _ := srv.counts(); attempts != 1 {
		t.Fatalf("server saw %d attempts, want 1: only the valid message was enqueued", attempts)
	}
}

func TestSendTxExistsOnlyIfTheTransactionCommits(t *testing.T) {
	t.Parallel()
	srv := startScripted(t)
	b := setup(t, config{port: srv.port})
	pool, err := db.Get(b.svc.App)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.mail.SendTx(ctx, tx, msg("rolled back")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.mail.SendTx(ctx, tx, msg("committed")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "committed message delivered", func() bool { _, n := srv.counts(); return n >= 1 })
	got := srv.messages()
	if len(got) != 1 || !strings.Contains(got[0].data, "Subject: committed") {
		t.Fatalf("delivered %d messages (%v), want only the committed one", len(got), got)
	}
}

func TestLogTransportWritesTheMessageToTheLog(t *testing.T) {
	t.Parallel()
	b := setup(t, config{transport: "log", port: closedPort(t), mail: `username = "u"
password = "log-transport-secret"`})
	m := msg("logged")
	m.HTML = "<p>logged html</p>"
	m.Attachments = []mail.Attachment{{Filename: "a.txt", ContentType: "text/plain", Data: []byte("abc")}}
	if err := b.mail.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// The delivery is recorded just after the line is written: wait for
	// both.
	eventually(t, 20*time.Second, "message in the log, delivery recorded", func() bool {
		_, recorded := b.mail.LastDelivery()
		return recorded && strings.Contains(b.svc.Logs(), "log transport")
	})
	logs := b.svc.Logs()
	if !contains(logs, "subject=logged", "hello logged", "<p>logged html</p>", "a.txt (text/plain, 3 bytes)", "ada@example.com") {
		t.Fatalf("log transport line lacks the message:\n%s", logs)
	}
	if strings.Contains(logs, "log-transport-secret") {
		t.Fatalf("password in the logs:\n%s", logs)
	}
	if last, ok := b.mail.LastDelivery(); !ok || last.Result != "sent" {
		t.Fatalf("last delivery %+v, want sent", last)
	}
}

func TestSendWithTheQueueDownIsA503NamingTheQueue(t *testing.T) {
	t.Parallel()
	down := private.URLVia(fmt.Sprintf("127.0.0.1:%d", closedPort(t)))
	b := setup(t, config{db: down, port: closedPort(t), queue: `enqueue_timeout = "1s"`})
	start := time.Now()
	err := b.mail.Send(context.Background(), msg("queue down"))
	if err == nil {
		t.Fatal("Send with the queue's database down = nil")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Send took %s, want within enqueue_timeout (1s)", took)
	}
	p := problem.From(err)
	if p.Status != http.StatusServiceUnavailable || !strings.Contains(string(mustJSON(t, p)), `"dependency":"queue"`) {
		t.Fatalf("problem %d %s, want 503 naming the queue (err %v)", p.Status, mustJSON(t, p), err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
