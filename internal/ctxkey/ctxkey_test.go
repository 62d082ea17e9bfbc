package ctxkey_test

import (
	"context"
	"testing"

	"github.com/jfastframework/jfast/internal/ctxkey"
)

// The probe must find the key, and it must be the one the context package's
// own cancel contexts answer: a cancel context returns itself for it.
func TestCancelIsTheContextPackagesKey(t *testing.T) {
	if ctxkey.Cancel == nil {
		t.Fatal("the probe saw no key: context.Cause changed; revisit the request and enqueue contexts")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if ctx.Value(ctxkey.Cancel) == nil {
		t.Fatal("a cancel context does not answer ctxkey.Cancel: it is not the context package's key")
	}
	if context.Background().Value(ctxkey.Cancel) != nil {
		t.Fatal("Background answers ctxkey.Cancel")
	}
}
