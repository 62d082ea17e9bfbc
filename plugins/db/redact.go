package db

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jfastframework/jfast/framework"
)

// redactText is text with every password masked the way jfast masks them
// everywhere (framework.MaskSecrets): the password of any URL, and the value
// of a password= pair. Passwords are masked where they stand, never searched
// for elsewhere in the text: a password that is also the user's or the
// database's name must not turn "user=app database=app" into something else.
// pgx's own messages already print a connection string's password as xxxxx.
func redactText(text string) string { return framework.MaskSecrets(text) }

// redactError is err's text with its passwords masked.
func redactError(err error) string { return redactText(err.Error()) }

// safeError keeps err for errors.Is/As but prints it without the password.
type safeError struct {
	msg string
	err error
}

func (e *safeError) Error() string { return e.msg }
func (e *safeError) Unwrap() error { return e.err }

// scrub returns err unchanged when its text holds no password, or an error
// with the same chain whose text has the passwords masked.
func scrub(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	r := redactText(s)
	if r == s {
		return err
	}
	return &safeError{msg: r, err: err}
}

// parseReason is why pgx could not parse dsn, without dsn: it may carry a
// user, a host and a database besides the password, which a boot error
// never quotes (docs/framework.md). A URL of another scheme is named by it.
func parseReason(dsn string, err error) string {
	if scheme, _, ok := strings.Cut(dsn, "://"); ok && scheme != "postgres" && scheme != "postgresql" && !strings.ContainsAny(scheme, " =") {
		return fmt.Sprintf("the scheme is %q, not postgres or postgresql", scheme)
	}
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return redactError(err)
	}
	// "cannot parse `<dsn, password masked>`: <reason>"
	reason := pe.Error()
	if i := strings.LastIndex(reason, "`: "); strings.HasPrefix(reason, "cannot parse `") && i >= 0 {
		reason = reason[i+len("`: "):]
	}
	return redactText(strings.ReplaceAll(reason, pe.ConnString, "the value"))
}
