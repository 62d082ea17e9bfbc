package db

import (
	"net/url"
	"regexp"
	"strings"
)

// redacted replaces every password jfast prints.
const redacted = "xxxxx"

var (
	// key=value form: password=secret or password='se cret'.
	kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]+)`)
	// URL form, also inside a longer text: scheme://user:secret@host.
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)([^@\s]*)@`)
)

// passwords returns the passwords a connection string carries, raw and
// URL-decoded, so they can be removed from any text.
func passwords(dsn string) []string {
	var out []string
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p)
		}
	}
	for _, m := range urlPassword.FindAllStringSubmatch(dsn, -1) {
		if m[2] != "" {
			out = append(out, m[2])
		}
	}
	for _, m := range kvPassword.FindAllStringSubmatch(dsn, -1) {
		p := strings.Trim(m[2], "'")
		if p != "" {
			out = append(out, p)
		}
	}
	if u, err := url.Parse(dsn); err == nil {
		if p := u.Query().Get("password"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// redactText removes from text every password found in dsn, and anything
// that looks like a password in a connection string.
func redactText(text, dsn string) string {
	text = urlPassword.ReplaceAllString(text, "${1}"+redacted+"@")
	text = kvPassword.ReplaceAllString(text, "${1}"+redacted)
	for _, p := range passwords(dsn) {
		if len(p) >= 3 { // too short a needle would mangle unrelated text
			text = strings.ReplaceAll(text, p, redacted)
			text = strings.ReplaceAll(text, url.QueryEscape(p), redacted)
			text = strings.ReplaceAll(text, url.PathEscape(p), redacted)
		}
	}
	return text
}

// redactError is err's text with dsn's password removed.
func redactError(err error, dsn string) string {
	return redactText(err.Error(), dsn)
}

// safeError keeps err for errors.Is/As but prints it without the password.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// scrub returns err unchanged when its text holds no password of dsn, or
// an error with the same chain whose text has the password removed.
func scrub(err error, dsn string) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	if !mayHoldSecret(s, dsn) {
		return err
	}
	r := redactText(s, dsn)
	if r == s {
		return err
	}
	return &safeError{msg: r, err: err}
}

// mayHoldSecret is a cheap first look before the regular expressions: a
// password can only be in text that holds it, or that looks like a
// connection string.
func mayHoldSecret(text, dsn string) bool {
	if strings.Contains(text, "://") || strings.Contains(strings.ToLower(text), "password") {
		return true
	}
	for _, p := range passwords(dsn) {
		if len(p) >= 3 && (strings.Contains(text, p) || strings.Contains(text, url.QueryEscape(p)) || strings.Contains(text, url.PathEscape(p))) {
			return true
		}
	}
	return false
}
