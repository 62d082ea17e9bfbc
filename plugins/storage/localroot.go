package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// fileID is what a local disk reads from a file's metadata beyond
// fs.FileInfo: the filesystem (device) it is on, its inode and its link
// count. known is false where the platform gives none of them.
type fileID struct {
	dev, ino, links uint64
	known           bool
}

// open returns the root, checked to still be the directory at the disk's
// root path: not removed, not replaced, and on the filesystem it was on
// when this process first opened it. The first open of the process creates
// the directory if it is missing (a new service's disk); a root that
// could not be opened at start (a volume not mounted yet) is tried again by
// the next operation instead of failing forever. Once opened, a root that
// went away is never created again: a missing root is an unmounted volume
// as often as a removed directory, and writes made into a new one would land
// on the wrong filesystem and vanish from the service's view when the volume
// comes back. The disk fails instead (a 503, and /ready says why) until the
// directory is back.
//
// The first root opened stays open until close (d.pin), even once it went
// away: a filesystem unmounted lazily lives while a file on it is open, so
// its device number is not freed and cannot be given to a new filesystem
// mounted at the path (a new tmpfs takes the lowest free number), which the
// device check would otherwise take for the old one.
func (d *localDriver) open() (*os.Root, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root != nil {
		if d.current() {
			return d.root, nil
		}
		if d.root != d.pin {
			d.root.Close()
		}
		d.root = nil
	}
	if d.first == nil {
		if err := os.MkdirAll(d.dir, d.dirPerm); err != nil {
			return nil, rootError(d.dir, "cannot be created", err)
		}
	}
	r, err := os.OpenRoot(d.dir)
	switch {
	case err != nil && d.first != nil && errors.Is(err, fs.ErrNotExist):
		return nil, rootError(d.dir, "is missing (removed, or its volume unmounted); it is not created again while the service runs", nil)
	case err != nil:
		return nil, rootError(d.dir, "cannot be opened", err)
	}
	fi, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, rootError(d.dir, "cannot be read", err)
	}
	if d.first != nil && fileIDOf(fi).dev != fileIDOf(d.first).dev {
		r.Close()
		return nil, rootError(d.dir, "is on another filesystem than when the service opened it (a volume unmounted from it or mounted over it): restore it, or restart the service to use this one", nil)
	}
	if d.first == nil {
		d.first, d.pin = fi, r
	}
	d.root = r
	return r, nil
}

// current reports whether d.root is still the directory at the root path: a
// removed directory has no links left, and a path that names another
// directory (made again, or a volume mounted or unmounted there) is not the
// same file. Two stats (1.6 µs measured, see docs/storage.md), paid by every
// operation so that none reads a vanished root as an empty one.
func (d *localDriver) current() bool {
	held, err := d.root.Stat(".")
	if err != nil {
		return false
	}
	if id := fileIDOf(held); id.known && id.links == 0 {
		return false
	}
	now, err := os.Stat(d.dir)
	return err == nil && os.SameFile(held, now)
}

// missing returns err, the error of an operation that found nothing (it
// matches fs.ErrNotExist) or nil for a Delete of nothing, unless the root
// itself went away during the operation: then the root's error, so that a
// vanished root is never taken for a missing object.
func (d *localDriver) missing(err error) error {
	if _, rerr := d.open(); rerr != nil {
		return rerr
	}
	return err
}

func (d *localDriver) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root != nil && d.root != d.pin {
		d.root.Close()
	}
	if d.pin != nil {
		d.pin.Close()
	}
	d.root, d.pin = nil, nil
}

// check is the /ready probe: the root is opened and checked as for an
// operation, then read, as List and every key's lookup read it.
func (d *localDriver) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := d.open()
	if err != nil {
		return err
	}
	f, err := root.Open(".")
	if err != nil {
		return rootError(d.dir, "cannot be read", err)
	}
	defer f.Close()
	if _, err := f.ReadDir(1); err != nil && err != io.EOF {
		return rootError(d.dir, "cannot be read", err)
	}
	return nil
}

// rootError is the error of a root the disk cannot use. The cause is kept as
// text, not wrapped: a missing root is the disk's failure (a 503 naming
// storage), and its ENOENT must not match fs.ErrNotExist, which says that an
// object is missing (Exists would answer false, and a handler 404).
func rootError(dir, what string, cause error) error {
	msg := "root " + strconv.Quote(dir) + " " + what
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return errors.New(msg)
}
