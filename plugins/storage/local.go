package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tempPrefix starts the name of a file being written; List skips such files.
const tempPrefix = ".jfast-put-"

// localDriver keeps objects as files under a root directory. Every access goes
// through an os.Root, so no key and no symbolic link inside the root can reach
// a file outside it, even if key validation had a hole.
type localDriver struct {
	dir      string
	baseURL  string
	filePerm os.FileMode
	dirPerm  os.FileMode
	signer   *signer

	// dirs is held while a Put makes a key's directories and its temporary
	// file, or replaces an empty directory at its key, and while a Delete
	// removes an object and the directories it leaves empty: otherwise the
	// prune removes a directory a Put has just made and is about to use.
	dirs sync.Mutex

	mu    sync.Mutex
	root  *os.Root
	first fs.FileInfo // the root when this process first opened it; nil before
	pin   *os.Root    // that root, held open until close (see open)
}

func newLocalDriver(cfg DiskConfig, s *signer) *localDriver {
	d := &localDriver{dir: cfg.Root, baseURL: strings.TrimSuffix(cfg.BaseURL, "/"), signer: s,
		filePerm: 0o600, dirPerm: 0o700}
	if Visibility(cfg.Visibility) == Public {
		// Public files are read by whatever serves base_url (a web server
		// running as another user): world-readable, as the visibility says.
		d.filePerm, d.dirPerm = 0o644, 0o755
	}
	return d
}

func (d *localDriver) put(ctx context.Context, key string, body watched, _ int64, _ string, _ requester) (err error) {
	root, err := d.open()
	if err != nil {
		return err
	}
	f, tmp, err := d.createTemp(root, key)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, contextReader{ctx, body}); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := ctx.Err(); err != nil {
		// The caller gave up while the last read waited, and the body
		// ended then (a producer closed on the same cancellation, as an
		// io.Pipe's is): what arrived is most likely short.
		return fmt.Errorf("write: %w", err)
	}
	// Synced before the rename: after a crash the key holds the old object or
	// the new one, never a truncated file.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := root.Rename(tmp, key); err != nil {
		return d.replaceDir(root, tmp, key, err)
	}
	return nil
}

// createTemp makes the directories of key and, in the last one, the
// temporary file Put writes, under d.dirs: once the file is there its
// directory is not empty, so a Delete pruning the directories it emptied
// cannot remove it between the two steps.
func (d *localDriver) createTemp(root *os.Root, key string) (*os.File, string, error) {
	d.dirs.Lock()
	defer d.dirs.Unlock()
	dir := path.Dir(key)
	if err := root.MkdirAll(dir, d.dirPerm); err != nil {
		// Decided by what is on disk, not by the errno (os.Root reports a
		// file in the way as EEXIST or ENOTDIR depending on its depth).
		if above := objectAbove(root, key); above != "" {
			return nil, "", &ConflictError{Key: key, Existing: above}
		}
		return nil, "", fmt.Errorf("create directory: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, d.filePerm)
	if err != nil {
		return nil, "", fmt.Errorf("create temporary file: %w", err)
	}
	return f, tmp, nil
}

// replaceDir ends a Put whose rename of tmp over key failed with err. The key
// is a directory: empty (left behind by something other than Delete), it is
// no object, so it is removed and the rename tried again; holding objects,
// it is the caller's conflict. Under d.dirs, so that the directory is not
// removed while another Put is making it for a key under it.
func (d *localDriver) replaceDir(root *os.Root, tmp, key string, err error) error {
	d.dirs.Lock()
	defer d.dirs.Unlock()
	if isDir(root, key) && root.Remove(key) == nil && root.Rename(tmp, key) == nil {
		return nil
	}
	_ = root.Remove(tmp)
	if isDir(root, key) {
		return &ConflictError{Key: key, Existing: key, Under: true}
	}
	return fmt.Errorf("rename into place: %w", err)
}

func (d *localDriver) get(ctx context.Context, key string) (*Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := d.open()
	if err != nil {
		return nil, err
	}
	f, err := root.Open(key)
	if err != nil {
		return nil, d.missingUnder(key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notFile(key)
	}
	return &Object{Info: localInfo(key, fi), Body: f}, nil
}

func (d *localDriver) stat(ctx context.Context, key string) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	root, err := d.open()
	if err != nil {
		return Info{}, err
	}
	fi, err := root.Stat(key)
	if err != nil {
		return Info{}, d.missingUnder(key, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, notFile(key)
	}
	return localInfo(key, fi), nil
}

func (d *localDriver) delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := d.open()
	if err != nil {
		return err
	}
	fi, err := root.Lstat(key)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return d.missing(nil) // missing, or under an object: nothing to delete
	case err != nil:
		return err
	case fi.IsDir():
		return nil // a "directory" is not an object: there is nothing to delete
	}
	d.dirs.Lock()
	defer d.dirs.Unlock()
	if err := root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Remove the directories the object leaves empty, as S3 has none; a
	// directory that is not empty (or was just refilled) stays. Under
	// d.dirs, so no Put is between making a directory and filling it.
	for dir := path.Dir(key); dir != "."; dir = path.Dir(dir) {
		if root.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// listPage walks the directory that holds every key starting with prefix and
// returns all matches in one page.
func (d *localDriver) listPage(ctx context.Context, prefix, _ string) ([]Info, string, error) {
	root, err := d.open()
	if err != nil {
		return nil, "", err
	}
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = prefix[:i]
	}
	var out []Info
	err = fs.WalkDir(root.FS(), start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				return err
			}
			// Nothing under this prefix (or an object is in its way), or a
			// directory a Delete removed (or replaced by an object) while
			// we walked: nothing to list there, as for a file deleted
			// meanwhile, unless the root itself went away.
			if err := d.missing(nil); err != nil {
				return err
			}
			return fs.SkipDir
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.IsDir() {
			// Skip directories that cannot hold a match.
			if p != "." && !strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(prefix, p+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tempPrefix) || !strings.HasPrefix(p, prefix) {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while we walked
		}
		if err != nil {
			return err
		}
		info := localInfo(p, fi)
		info.ContentType = "" // as on S3, whose list has none
		out = append(out, info)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, "", nil
}

func (d *localDriver) publicURL(key string) string {
	return d.baseURL + "/" + escapeKey(key)
}

func (d *localDriver) temporaryURL(_ context.Context, key string, ttl time.Duration) (string, error) {
	return d.signer.url(key, ttl), nil
}

// missingUnder turns the ENOTDIR of a key under an object ("a/b" while "a"
// is an object) into the missing object it is, as on S3, and checks that a
// missing object was not missing because the root went away (missing); any
// other error is returned as is.
func (d *localDriver) missingUnder(key string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) {
		err = notFile(key)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return d.missing(err)
	}
	return err
}

// notFile is the error for a key that names a directory or a device: not an
// object, so a missing one.
func notFile(key string) error {
	return &fs.PathError{Op: "open", Path: key, Err: fs.ErrNotExist}
}

// contextReader stops a local copy when the caller gives up.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
