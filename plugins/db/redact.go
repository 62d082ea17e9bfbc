package db

import (
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
