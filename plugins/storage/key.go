package storage

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/jfastframework/jfast/problem"
)

// ErrInvalidKey matches, with errors.Is, every [*KeyError].
var ErrInvalidKey = errors.New("invalid storage key")

// maxKeyLen is S3's limit on a key, applied to every driver so a key that works
// on a local disk in development also works on S3 in production.
const maxKeyLen = 1024

// KeyError is returned, before any I/O, for a key no disk accepts: empty, too
// long, not UTF-8, absolute, holding NUL, a backslash, an empty segment, "." or
// "..". A key is never cleaned into a different one: "a/../b" is an error, not
// "b", so a traversal attempt can never name a file outside the disk.
//
// It renders as a 400 problem: keys often come from a request.
type KeyError struct {
	// Key is the rejected key, for logs. It is not sent to the client.
	Key string
	// Reason says what is wrong, e.g. "it holds a \"..\" segment".
	Reason string
}

// Error returns "invalid storage key: <reason>". The key is left out: it may be
// hostile input.
func (e *KeyError) Error() string { return "invalid storage key: " + e.Reason }

// Is reports whether target is [ErrInvalidKey].
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

// Problem implements problem.Renderer: 400 with the reason.
func (e *KeyError) Problem() *problem.Problem {
	p := problem.BadRequest(e.Error())
	p.Err = e
	return p
}

// ValidateKey reports whether key is a valid object key: what every disk
// operation checks first. Segments are separated by "/".
func ValidateKey(key string) error {
	return validate(key, false)
}

// validate checks a key, or a List prefix when prefix is true (a prefix may be
// empty and may end with "/").
func validate(key string, prefix bool) error {
	bad := func(reason string) error { return &KeyError{Key: key, Reason: reason} }
	switch {
	case key == "" && !prefix:
		return bad("it is empty")
	case len(key) > maxKeyLen:
		return bad("it is longer than 1024 bytes")
	case !utf8.ValidString(key):
		return bad("it is not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return bad("it holds a NUL byte")
	case strings.IndexByte(key, '\\') >= 0:
		return bad("it holds a backslash")
	case strings.HasPrefix(key, "/"):
		return bad("it is absolute (starts with /)")
	}
	rest := key
	if prefix {
		rest = strings.TrimSuffix(rest, "/")
		if rest == "" {
			if key != "" {
				return bad("it is absolute (starts with /)")
			}
			return nil
		}
	}
	for seg := range strings.SplitSeq(rest, "/") {
		switch seg {
		case "":
			return bad("it holds an empty segment (// or a trailing /)")
		case ".":
			return bad(`it holds a "." segment`)
		case "..":
			return bad(`it holds a ".." segment`)
		}
	}
	return nil
}
