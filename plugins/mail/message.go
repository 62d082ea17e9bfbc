package mail

import (
	"fmt"
	"net/mail"
	"strings"

	"github.com/jfastframework/jfast/problem"
)

// Message is one email. Send validates it and enqueues it; a delivery job sends
// it. It travels through the queue as JSON, so it holds only data.
type Message struct {
	// From is the sender; empty means [plugin.mail] from.
	From string `json:"from,omitempty"`
	// To, Cc and Bcc are the recipients; at least one address in all three.
	// Bcc addresses get the message but do not appear in its headers.
	To  []string `json:"to,omitempty"`
	Cc  []string `json:"cc,omitempty"`
	Bcc []string `json:"bcc,omitempty"`
	// ReplyTo is the Reply-To address; empty means [plugin.mail] reply_to.
	ReplyTo string `json:"reply_to,omitempty"`
	// Subject is required (one line).
	Subject string `json:"subject"`
	// Text is the plain-text body, HTML the HTML body. At least one is
	// required; with both, the message is multipart/alternative.
	Text string `json:"text,omitempty"`
	HTML string `json:"html,omitempty"`
	// Attachments are attached files.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Headers are extra headers (e.g. "X-Campaign"); they cannot replace the
	// address, subject or MIME headers set from the fields above.
	Headers map[string]string `json:"headers,omitempty"`
}

// Attachment is one attached file.
type Attachment struct {
	// Filename is the name the recipient sees. Required.
	Filename string `json:"filename"`
	// ContentType is its MIME type; empty means application/octet-stream.
	ContentType string `json:"content_type,omitempty"`
	// Data is the file's content.
	Data []byte `json:"data"`
}

// MaxMessageBytes caps a message's bodies and attachments together: the message
// is stored in the queue as a job payload (base64 for attachments), and 10 MiB
// is below what common SMTP servers accept (Gmail 25 MB, Microsoft 365 about
// 25–35 MB after encoding).
const MaxMessageBytes = 10 << 20

// InvalidMessageError is a Message that Send refused: nothing was enqueued.
// It renders as a 422 problem listing each invalid field.
type InvalidMessageError struct {
	Fields []problem.FieldError
}

func (e *InvalidMessageError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Detail
	}
	return "mail: invalid message: " + strings.Join(parts, "; ")
}

// Problem implements problem.Renderer: 422 with the invalid fields.
func (e *InvalidMessageError) Problem() *problem.Problem {
	p := problem.Unprocessable("the email message is invalid", e.Fields...)
	p.Err = e
	return p
}

// reservedHeaders are set from Message's fields and the MIME structure.
var reservedHeaders = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "reply-to": true, "subject": true,
	"content-type": true, "content-transfer-encoding": true, "mime-version": true,
	"sender": true, "date": true, "message-id": true,
}

// check validates m once defaults are applied; it returns nil or an
// *InvalidMessageError listing every problem.
func (m *Message) check() error {
	var errs []problem.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, problem.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	if m.From == "" {
		add("from", "is empty and [plugin.mail] from is not set")
	} else if _, err := mail.ParseAddress(m.From); err != nil {
		add("from", "%q is not an email address", m.From)
	}
	if m.ReplyTo != "" {
		if _, err := mail.ParseAddress(m.ReplyTo); err != nil {
			add("reply_to", "%q is not an email address", m.ReplyTo)
		}
	}
	for _, l := range []struct {
		name  string
		addrs []string
	}{{"to", m.To}, {"cc", m.Cc}, {"bcc", m.Bcc}} {
		for i, a := range l.addrs {
			if _, err := mail.ParseAddress(a); err != nil {
				add(fmt.Sprintf("%s[%d]", l.name, i), "%q is not an email address", a)
			}
		}
	}
	if len(m.To)+len(m.Cc)+len(m.Bcc) == 0 {
		add("to", "no recipient: set at least one address in to, cc or bcc")
	}
	switch {
	case strings.TrimSpace(m.Subject) == "":
		add("subject", "is empty")
	case strings.ContainsAny(m.Subject, "\r\n"):
		add("subject", "must be one line")
	}
	if strings.TrimSpace(m.Text) == "" && strings.TrimSpace(m.HTML) == "" {
		add("text", "no body: set text, html or both")
	}
	size := len(m.Text) + len(m.HTML)
	for i, a := range m.Attachments {
		size += len(a.Data)
		switch {
		case strings.TrimSpace(a.Filename) == "":
			add(fmt.Sprintf("attachments[%d].filename", i), "is empty")
		case strings.ContainsAny(a.Filename, "\r\n/\\"):
			add(fmt.Sprintf("attachments[%d].filename", i), "must be a file name without line breaks or path separators")
		}
		if a.ContentType != "" && strings.ContainsAny(a.ContentType, "\r\n") {
			add(fmt.Sprintf("attachments[%d].content_type", i), "must be one line")
		}
	}
	if size > MaxMessageBytes {
		add("attachments", "the bodies and attachments are %d bytes, over the limit of %d", size, MaxMessageBytes)
	}
	for k, v := range m.Headers {
		switch {
		case reservedHeaders[strings.ToLower(k)]:
			add("headers."+k, "is set from the message's fields and cannot be given as a header")
		case k == "" || strings.ContainsAny(k, ": \t\r\n"):
			add("headers."+k, "is not a header name")
		case strings.ContainsAny(v, "\r\n"):
			add("headers."+k, "value must be one line")
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &InvalidMessageError{Fields: errs}
}
