package storage

import (
	"errors"
	"fmt"
	"os"

	"github.com/jfastframework/jfast/problem"
)

// ErrConflict matches, with errors.Is, every [*ConflictError].
var ErrConflict = errors.New("storage key conflicts with a stored object")

// ConflictError is returned by Put on a local disk when the key cannot be
// stored because of what the disk already holds: a local disk keeps objects
// as files, and one path cannot be a file and a directory at once. Either a
// leading part of the key is an object (Put "a/b" while "a" is stored), or
// the key is a directory of other objects (Put "a" while "a/b" is stored).
// S3 keys are flat, so an s3 disk never returns it.
//
// Nothing was written and the object in the way is untouched. It is the
// caller's conflict, not an outage: it renders as a 409 problem and counts
// for nothing in a breaker.
type ConflictError struct {
	// Key is the key Put was given, for logs. It is not sent to the client.
	Key string
	// Existing is the key of what is in the way: the object whose key is a
	// leading part of Key, or Key itself when it holds other objects. For
	// logs; not sent to the client.
	Existing string
	// Under is true when Existing is Key, a directory of other objects.
	Under bool
}

// Error returns a sentence naming both keys, for logs.
func (e *ConflictError) Error() string {
	if e.Under {
		return fmt.Sprintf("%v: %q holds other objects under it (%q/...), so it cannot be an object", ErrConflict, e.Key, e.Key)
	}
	return fmt.Sprintf("%v: %q is an object, so %q cannot be stored under it", ErrConflict, e.Existing, e.Key)
}

// Is reports whether target is [ErrConflict].
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Problem implements problem.Renderer: 409 Conflict. The request is well
// formed (not a 400) but cannot be applied to the current state of the
// disk, which is what 409 says (RFC 9110 §15.5.10); the keys are left out,
// as they may be hostile input.
func (e *ConflictError) Problem() *problem.Problem {
	detail := "the key cannot be stored: a leading part of it is an existing object"
	if e.Under {
		detail = "the key cannot be stored: other objects are stored under it"
	}
	p := problem.Conflict(detail)
	p.Err = e
	return p
}

// objectAbove returns the first leading part of key ("a" for "a/b/c") that
// is stored as something other than a directory, or "" when there is none.
// A stat error (a missing part, a permission denied) is no evidence of a
// conflict: the caller reports its own error.
func objectAbove(root *os.Root, key string) string {
	for i := range len(key) {
		if key[i] != '/' {
			continue
		}
		fi, err := root.Lstat(key[:i])
		if err != nil {
			return ""
		}
		if !fi.IsDir() {
			return key[:i]
		}
	}
	return ""
}

// isDir reports whether key is stored as a directory.
func isDir(root *os.Root, key string) bool {
	fi, err := root.Lstat(key)
	return err == nil && fi.IsDir()
}

var _ problem.Renderer = (*ConflictError)(nil)
