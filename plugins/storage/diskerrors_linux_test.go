//go:build linux

package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// assertDiskDown checks that err is the storage dependency error, a 503: the
// disk failed, not the caller.
func assertDiskDown(t *testing.T, what string, err error) {
	t.Helper()
	var de *problem.DependencyError
	p, ok := problem.As(err)
	if !errors.As(err, &de) || de.Dependency != "storage" || !ok || p.Status != http.StatusServiceUnavailable || errors.Is(err, storage.ErrConflict) {
		t.Fatalf("%s: %v (%T), problem %+v; want the 503 storage dependency error", what, err, err, p)
	}
}

// unwritable makes dir refuse new entries, even to root, and undoes it at
// cleanup: chmod 0500 for an ordinary user, the immutable attribute
// (chattr +i) for root, whom permissions do not stop.
func unwritable(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot make the root immutable as root (chattr +i): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
}

// Real disk errors are outages, 503 like a disk that is down, never the 409 of
// a conflicting key: a root that refuses writes (also for a key whose
// directory would have to be made), and a full disk. An I/O error (EIO) is
// not produced here; like every error other than a key in conflict, it is a 503.
func TestLocalDiskErrorsAre503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("the root refuses writes", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		d := start(t, localTOML(root), "files", nil).disk
		if err := d.Put(ctx, "seed", strings.NewReader("kept"), ""); err != nil {
			t.Fatal(err)
		}
		unwritable(t, root)
		assertDiskDown(t, "put in an unwritable root", d.Put(ctx, "x", strings.NewReader("v"), ""))
		assertDiskDown(t, "put needing a directory in an unwritable root", d.Put(ctx, "n/x", strings.NewReader("v"), ""))
		if body, _ := readAll(t, d, "seed"); body != "kept" {
			t.Fatalf("seed = %q", body)
		}
	})

	t.Run("the disk is full", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		// A private 64 KiB tmpfs: ENOSPC for real, without filling a shared disk.
		mountTmpfs(t, root, "64k")
		d := start(t, localTOML(root), "files", nil).disk
		assertDiskDown(t, "put of 1 MiB on a 64 KiB disk", d.Put(ctx, "big/blob", bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)), ""))
		if ok, err := d.Exists(ctx, "big/blob"); ok || err != nil {
			t.Fatalf("after a full disk: exists = %v, %v; want nothing stored", ok, err)
		}
		if left := temporaryFiles(t, root); len(left) != 0 {
			t.Fatalf("temporary files left on the full disk: %v", left)
		}
		if err := d.Put(ctx, "small", strings.NewReader("fits"), ""); err != nil {
			t.Fatalf("a small put after the failed one: %v", err)
		}
	})
}

// mountTmpfs mounts a private tmpfs of size at dir, unmounted (lazily) at
// cleanup; the test is skipped where mounting needs a root it does not have.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a private tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// everyOperation runs each operation of d once, on the key "seed" (put before
// the root went), a missing key and a key in a new directory, and returns
// their errors.
func everyOperation(d *storage.Disk) map[string]error {
	ctx := context.Background()
	errs := map[string]error{
		"put":                     d.Put(ctx, "new", strings.NewReader("v"), ""),
		"put in a new directory":  d.Put(ctx, "dir/new", strings.NewReader("v"), ""),
		"delete":                  d.Delete(ctx, "seed"),
		"delete of a missing key": d.Delete(ctx, "missing"),
	}
	_, errs["get"] = d.Get(ctx, "seed")
	_, errs["get of a missing key"] = d.Get(ctx, "missing")
	_, errs["stat"] = d.Stat(ctx, "seed")
	_, errs["exists"] = d.Exists(ctx, "missing")
	errs["list"] = errors.New("list yielded no error")
	for _, err := range d.List(ctx, "") {
		errs["list"] = err
	}
	return errs
}

// A root that goes away while the service runs is the disk's outage, never a
// missing object: every operation is the 503 storage error (counted as an
// error, not as not_found), /ready reports the disk unreachable (503 when
// storage is critical), and no operation makes the root again. A directory
// put back at the path is used again, and a key missing from it is not found
// as before.
func TestLocalRootThatWentAwayIs503(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		critical bool
		ready    int
		gone     func(t *testing.T, root string)
	}{
		{"removed", false, http.StatusOK, func(t *testing.T, root string) {
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by a file, storage critical", true, http.StatusServiceUnavailable, func(t *testing.T, root string) {
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(root, []byte("not a directory"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "root")
			s := start(t, fmt.Sprintf("[plugin.storage]\ncritical = %t\n", tc.critical)+localTOML(root), "files", nil)
			if err := s.disk.Put(context.Background(), "seed", strings.NewReader("kept"), ""); err != nil {
				t.Fatal(err)
			}
			tc.gone(t, root)

			for op, err := range everyOperation(s.disk) {
				assertDiskDown(t, op, err)
			}
			if n := jfasttest.Metric(t, s.svc.App.Metrics(), "jfast_storage_operations_total", "outcome", "not_found"); n != 0 {
				t.Errorf("%v operations counted not_found, want every one an error", n)
			}
			if fi, err := os.Lstat(root); err == nil && fi.IsDir() {
				t.Fatal("an operation made the root again")
			}
			r := s.svc.Get(t, "/ready")
			if r.Status != tc.ready || !strings.Contains(r.String(), `disk \"files\": root `) || !strings.Contains(r.String(), `"healthy":false`) {
				t.Fatalf("/ready = %d %s, want the disk unreachable", r.Status, r.Body)
			}

			// Put back by an operator: used again, and a key it lacks is missing.
			_ = os.Remove(root)
			if err := os.Mkdir(root, 0o700); err != nil {
				t.Fatal(err)
			}
			if _, err := s.disk.Get(context.Background(), "seed"); !errors.Is(err, storage.ErrNotExist) {
				t.Fatalf("get of a key the new root lacks = %v, want ErrNotExist", err)
			}
			if err := s.disk.Put(context.Background(), "dir/new", strings.NewReader("v"), ""); err != nil {
				t.Fatalf("put into the root put back: %v", err)
			}
			if r := s.svc.Get(t, "/ready"); r.Status != http.StatusOK || !strings.Contains(r.String(), `"status":"ok"`) {
				t.Fatalf("/ready with the root back = %d %s", r.Status, r.Body)
			}
		})
	}
}

// A root that is a mounted volume, unmounted while the service runs: the
// path then names the mount point's own directory, on another filesystem.
// The disk refuses it (503) rather than reading it as empty or writing into
// it, where the writes would be hidden when the volume is mounted again.
func TestLocalRootOnAnUnmountedVolumeIs503(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mountTmpfs(t, root, "1m")
	s := start(t, localTOML(root), "files", nil)
	if err := s.disk.Put(context.Background(), "seed", strings.NewReader("on the volume"), ""); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Unmount(root, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	for op, err := range everyOperation(s.disk) {
		assertDiskDown(t, op, err)
	}
	if left, err := os.ReadDir(root); err != nil || len(left) != 0 {
		t.Fatalf("written into the mount point's directory: %v %v", left, err)
	}
	r := s.svc.Get(t, "/ready")
	if !strings.Contains(r.String(), `"status":"degraded"`) || !strings.Contains(r.String(), "another filesystem") {
		t.Fatalf("/ready = %d %s, want the disk unreachable on another filesystem", r.Status, r.Body)
	}
}

// A tmpfs mounted anew at the root, after the service's volume was unmounted
// and an operation failed on it, is another filesystem and stays refused:
// the service still holds the first root open, so the unmounted tmpfs keeps
// its device number and the new one cannot be given the same (which, freed,
// it would be: a new tmpfs takes the lowest free number).
func TestLocalRootOnARemountedVolumeIs503(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mountTmpfs(t, root, "1m")
	s := start(t, localTOML(root), "files", nil)
	ctx := context.Background()
	if err := s.disk.Put(ctx, "seed", strings.NewReader("on the volume"), ""); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Unmount(root, syscall.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	_, err := s.disk.Get(ctx, "seed")
	assertDiskDown(t, "get with the volume unmounted", err)
	mountTmpfs(t, root, "1m")
	for op, err := range everyOperation(s.disk) {
		assertDiskDown(t, op+" on a new volume", err)
	}
	if r := s.svc.Get(t, "/ready"); !strings.Contains(r.String(), "another filesystem") {
		t.Fatalf("/ready = %d %s, want the disk unreachable on another filesystem", r.Status, r.Body)
	}
}
