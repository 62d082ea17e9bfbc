//go:build linux

package storage_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

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
		if err := syscall.Mount("tmpfs", root, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "size=64k,mode=0700"); err != nil {
			t.Skipf("cannot mount a private tmpfs (needs root): %v", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
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
