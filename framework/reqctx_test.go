package framework

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/requestid"
)

// The request context is the context package's own WithDeadline over one
// value-carrying layer; these tests check what that layer adds and that the
// standard behaviour (cancel at the end, Cause, a parent's earlier deadline)
// comes through it.

const far = time.Hour

func TestRequestContextIDAndHeader(t *testing.T) {
	h := http.Header{}
	_, ctx, cancel := requestContext(context.Background(), "abc-123", h, time.Now(), far, nil)
	defer cancel()
	if got := requestid.FromContext(ctx); got != "abc-123" {
		t.Fatalf("FromContext = %q, want the valid inbound ID", got)
	}
	if got := h.Get(requestid.Header); got != "abc-123" {
		t.Fatalf("response header = %q, want abc-123", got)
	}

	h = http.Header{}
	_, ctx, cancel = requestContext(context.Background(), "bad id\n", h, time.Now(), far, nil)
	defer cancel()
	id := requestid.FromContext(ctx)
	if len(id) != requestid.Len || id == "bad id\n" || h.Get(requestid.Header) != id {
		t.Fatalf("invalid inbound ID: context %q, header %q; want a fresh %d-character ID in both", id, h.Get(requestid.Header), requestid.Len)
	}
	// Derived contexts still find it, and other keys reach the parent.
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	_, ctx, cancel = requestContext(parent, "", http.Header{}, time.Now(), far, nil)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	if requestid.FromContext(child) != requestid.FromContext(ctx) || child.Value(key{}) != "v" {
		t.Fatalf("derived context: id %q value %v", requestid.FromContext(child), child.Value(key{}))
	}
}

func TestRequestContextRoute(t *testing.T) {
	route := chi.NewRouteContext()
	values, ctx, cancel := requestContext(context.Background(), "", http.Header{}, time.Now(), far, route)
	defer cancel()
	if chi.RouteContext(ctx) != route {
		t.Fatal("chi.RouteContext does not find the pooled routing context")
	}
	values.end()
	if chi.RouteContext(ctx) != nil {
		t.Fatal("the routing context is still reachable after the request ended (it is back in its pool)")
	}
	// A parent's routing context (a service mounted under another chi router)
	// is kept when the framework brings none.
	outer := chi.NewRouteContext()
	_, ctx, cancel = requestContext(context.WithValue(context.Background(), chi.RouteCtxKey, outer), "", http.Header{}, time.Now(), far, nil)
	defer cancel()
	if chi.RouteContext(ctx) != outer {
		t.Fatal("the parent's routing context is not kept")
	}
}

func TestRequestContextDeadline(t *testing.T) {
	start := time.Now()
	_, ctx, cancel := requestContext(context.Background(), "", http.Header{}, start, 30*time.Second, nil)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(start.Add(30*time.Second)) {
		t.Fatalf("Deadline() = %v, %v; want start+30s", d, ok)
	}
	// A parent with an earlier deadline keeps it.
	parent, cancelParent := context.WithDeadline(context.Background(), start.Add(time.Second))
	defer cancelParent()
	_, ctx, cancel = requestContext(parent, "", http.Header{}, start, 30*time.Second, nil)
	defer cancel()
	if d, _ := ctx.Deadline(); !d.Equal(start.Add(time.Second)) {
		t.Fatalf("Deadline() = %v, want the parent's earlier %v", d, start.Add(time.Second))
	}
	// A deadline already past: done at once.
	_, ctx, cancel = requestContext(context.Background(), "", http.Header{}, start.Add(-far), time.Second, nil)
	defer cancel()
	if err := ctx.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err() = %v, want DeadlineExceeded", err)
	}
}

func TestRequestContextEndAndCause(t *testing.T) {
	why := errors.New("client went away")
	parent, cancelParent := context.WithCancelCause(context.Background())
	_, ctx, cancel := requestContext(parent, "", http.Header{}, time.Now(), far, nil)
	defer cancel()
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })
	cancelParent(why)
	<-ctx.Done()
	if ctx.Err() != context.Canceled || context.Cause(ctx) != why {
		t.Fatalf("Err() = %v, Cause() = %v; want Canceled, %v", ctx.Err(), context.Cause(ctx), why)
	}
	<-ran

	_, ctx, cancel = requestContext(context.Background(), "", http.Header{}, time.Now(), far, nil)
	cancel() // the request's end
	if ctx.Err() != context.Canceled {
		t.Fatalf("after the request's end Err() = %v, want Canceled", ctx.Err())
	}
}
