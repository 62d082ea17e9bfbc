package storage_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jfastframework/jfast/plugins/storage"
)

// raceRounds is how often each race below is run: enough for the old code
// to lose a race within a few rounds, bounded so the test stays quick under
// -race. The fixed code must pass every round, so the count never makes a
// test flaky.
const raceRounds = 500

// together runs fns at once, released by one channel close so they start
// as near the same instant as goroutines allow, and waits for all of them.
func together(fns ...func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		wg.Go(func() {
			<-start
			fn()
		})
	}
	close(start)
	wg.Wait()
}

// A Put into a directory that a Delete is emptying succeeds, as on S3: the
// Delete's removal of the directories it left empty does not take the one
// the Put has just made (which failed the Put as a missing object).
func TestLocalPutRacingDeleteInTheSameDirectory(t *testing.T) {
	t.Parallel()
	d := start(t, localTOML(t.TempDir()), "files", nil).disk
	ctx := context.Background()
	for i := range raceRounds {
		dir := fmt.Sprintf("r%d/s/t/", i)
		if err := d.Put(ctx, dir+"old", strings.NewReader("v"), ""); err != nil {
			t.Fatal(err)
		}
		var putErr, delErr error
		together(
			func() { putErr = d.Put(ctx, dir+"new", strings.NewReader("v"), "") },
			func() { delErr = d.Delete(ctx, dir+"old") },
		)
		if putErr != nil || delErr != nil {
			t.Fatalf("round %d: put = %v, delete = %v; want both to succeed", i, putErr, delErr)
		}
		if body, _ := readAll(t, d, dir+"new"); body != "v" {
			t.Fatalf("round %d: new = %q", i, body)
		}
	}
}

// Two Puts racing for keys that cannot both be stored ("a" and "a/b") end
// with one stored and the other a ConflictError, whichever wins: never a
// missing object or a 503 from one removing the directory the other made.
func TestLocalConflictingPutsRacing(t *testing.T) {
	t.Parallel()
	d := start(t, localTOML(t.TempDir()), "files", nil).disk
	ctx := context.Background()
	for i := range raceRounds {
		a := fmt.Sprintf("r%d/a", i)
		var errs [2]error
		together(
			func() { errs[0] = d.Put(ctx, a, strings.NewReader("v"), "") },
			func() { errs[1] = d.Put(ctx, a+"/b", strings.NewReader("v"), "") },
		)
		stored, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				stored++
			case errors.Is(err, storage.ErrConflict):
				conflicts++
			}
		}
		if stored != 1 || conflicts != 1 {
			t.Fatalf("round %d: put a = %v, put a/b = %v; want one stored and one ConflictError", i, errs[0], errs[1])
		}
	}
}

// A List while Deletes empty the directories it walks lists what is still
// there without an error: a directory removed under it is skipped like a
// file deleted under it, not an error that says an object is missing.
func TestLocalListRacingDeletes(t *testing.T) {
	t.Parallel()
	d := start(t, localTOML(t.TempDir()), "files", nil).disk
	ctx := context.Background()
	// 10 rounds of 20 directories each, fewer than raceRounds: each round
	// gives the walk 20 directories to lose.
	for i := range 10 {
		prefix := fmt.Sprintf("r%d/", i)
		var keys []string
		for j := range 20 {
			keys = append(keys, fmt.Sprintf("%s%d/x/k", prefix, j))
			if err := d.Put(ctx, keys[j], strings.NewReader("v"), ""); err != nil {
				t.Fatal(err)
			}
		}
		var listErr error
		together(
			func() {
				for _, err := range d.List(ctx, prefix) {
					listErr = cmp.Or(listErr, err)
				}
			},
			func() {
				for _, k := range keys {
					if err := d.Delete(ctx, k); err != nil {
						t.Error(err)
					}
				}
			},
		)
		if listErr != nil {
			t.Fatalf("round %d: list while deleting: %v", i, listErr)
		}
	}
}
