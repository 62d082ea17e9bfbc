package mail_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/plugins/mail"
)

// mailpitBin finds the mailpit binary scripts/install-mailpit.sh installs, in
// PATH or $(go env GOPATH)/bin. Missing, the test fails (it does not skip).
func mailpitBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "mailpit")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("mailpit is not installed (not in PATH nor $(go env GOPATH)/bin): run scripts/install-mailpit.sh")
	return ""
}

// mailpit is a real SMTP server the test starts on free loopback ports, with
// its HTTP API to read delivered mail back.
type mailpit struct {
	smtpPort int
	api      string
}

func startMailpit(t *testing.T) *mailpit {
	t.Helper()
	bin := mailpitBin(t)
	smtpPort, httpPort := freePort(t), freePort(t)
	dir := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command(bin,
		"--smtp", fmt.Sprintf("127.0.0.1:%d", smtpPort),
		"--listen", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--database", filepath.Join(dir, "mailpit.db"),
		"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--disable-version-check")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mailpit: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	m := &mailpit{smtpPort: smtpPort, api: fmt.Sprintf("http://127.0.0.1:%d/api/v1", httpPort)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(m.api + "/messages")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", smtpPort), time.Second); err == nil {
					c.Close()
					return m
				}
			}
		}
		select {
		case <-exited:
			t.Fatalf("mailpit exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mailpit did not answer within 20s: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (m *mailpit) get(t *testing.T, path string, v any) []byte {
	t.Helper()
	resp, err := http.Get(m.api + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return b
}

type mpAddr struct{ Name, Address string }

type mpMessage struct {
	ID          string
	MessageID   string
	From        mpAddr
	To, Cc, Bcc []mpAddr
	ReplyTo     []mpAddr
	Subject     string
	Text, HTML  string
	Attachments []struct {
		PartID, FileName, ContentType string
		Size                          int
	}
}

func TestDeliveredContentThroughMailpit(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t)
	b := setup(t, config{port: mp.smtpPort, mail: `username = "shop-user"
password = "s3cret-mail-password"
reply_to = "help@example.com"`})
	pdf := []byte("%PDF-1.4 invoice 42\x00\x01\x02")
	err := b.mail.Send(context.Background(), mail.Message{
		To:      []string{"Ada Lovelace <ada@example.com>"},
		Cc:      []string{"bob@example.com"},
		Bcc:     []string{"audit@example.com"},
		Subject: "Your order #42 – thanks",
		Text:    "Thanks for your order.",
		HTML:    "<p>Thanks for your <b>order</b>.</p>",
		Headers: map[string]string{"X-Order": "42"},
		Attachments: []mail.Attachment{
			{Filename: "invoice-42.pdf", ContentType: "application/pdf", Data: pdf},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Messages []struct{ ID string }
	}
	eventually(t, 20*time.Second, "message in mailpit", func() bool {
		mp.get(t, "/messages", &list)
		return len(list.Messages) == 1
	})
	var got mpMessage
	mp.get(t, "/message/"+list.Messages[0].ID, &got)

	if got.From != (mpAddr{"Shop", "shop@example.com"}) {
		t.Errorf("From = %+v", got.From)
	}
	if len(got.To) != 1 || got.To[0] != (mpAddr{"Ada Lovelace", "ada@example.com"}) {
		t.Errorf("To = %+v", got.To)
	}
	if len(got.Cc) != 1 || got.Cc[0].Address != "bob@example.com" {
		t.Errorf("Cc = %+v", got.Cc)
	}
	if len(got.Bcc) != 1 || got.Bcc[0].Address != "audit@example.com" {
		t.Errorf("Bcc (from the envelope) = %+v", got.Bcc)
	}
	if len(got.ReplyTo) != 1 || got.ReplyTo[0].Address != "help@example.com" {
		t.Errorf("Reply-To = %+v (from [plugin.mail] reply_to)", got.ReplyTo)
	}
	if got.Subject != "Your order #42 – thanks" {
		t.Errorf("Subject = %q", got.Subject)
	}
	if strings.TrimSpace(got.Text) != "Thanks for your order." {
		t.Errorf("Text = %q", got.Text)
	}
	if !strings.Contains(got.HTML, "<p>Thanks for your <b>order</b>.</p>") {
		t.Errorf("HTML = %q", got.HTML)
	}
	if !strings.HasSuffix(got.MessageID, "@example.com") {
		t.Errorf("Message-ID = %q, want one in the sender's domain", got.MessageID)
	}
	if len(got.Attachments) != 1 || got.Attachments[0].FileName != "invoice-42.pdf" || got.Attachments[0].ContentType != "application/pdf" {
		t.Fatalf("Attachments = %+v", got.Attachments)
	}
	part := mp.get(t, "/message/"+got.ID+"/part/"+got.Attachments[0].PartID, nil)
	if !bytes.Equal(part, pdf) {
		t.Errorf("attachment bytes = %q, want %q", part, pdf)
	}
	var headers map[string][]string
	mp.get(t, "/message/"+got.ID+"/headers", &headers)
	if h := headers["X-Order"]; len(h) != 1 || h[0] != "42" {
		t.Errorf("X-Order header = %v", h)
	}
	// Mailpit records the envelope's Bcc in a header it adds above its own
	// Return-Path and Received; the message as sent starts below them.
	raw := string(mp.get(t, "/message/"+got.ID+"/raw", nil))
	end := strings.Index(raw, "\r\n\r\n")
	start := strings.Index(raw, "Return-Path:")
	// A header line named Bcc, not the letters anywhere: the Message-ID and
	// the MIME boundaries are random hex, which may hold "bcc".
	if start < 0 || end < start || strings.Contains(strings.ToLower("\r\n"+raw[start:end]), "\r\nbcc:") || strings.Contains(raw[start:], "audit@example.com") {
		t.Errorf("the Bcc address is in the message as sent:\n%s", raw)
	}
	if logs := b.svc.Logs(); strings.Contains(logs, "s3cret-mail-password") {
		t.Fatalf("the SMTP password is in the logs:\n%s", logs)
	}
	// Mailpit has the message once it accepted the DATA; the delivery is
	// recorded after the client's send returns, which can be later.
	eventually(t, 5*time.Second, "last delivery recorded as sent", func() bool {
		last, ok := b.mail.LastDelivery()
		return ok && last.Result == "sent"
	})
}

var _ = errors.New
