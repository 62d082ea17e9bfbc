package channels

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

// publishRoute mounts POST /publish/{channel}, which publishes the body.
func publishRoute(ch *Plugin, r chi.Router) {
	r.Method(http.MethodPost, "/publish/{channel}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		if err := ch.Publish(r.Context(), chi.URLParam(r, "channel"), body); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
}

// Three replicas subscribe to a broadcast channel; a request to one of them
// publishes: every replica's handler gets the message, with the publishing
// request's ID in the message and in the handler's context.
func TestBroadcastReachesEveryReplica(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", `broadcast = ["news"]`)
	var inboxes []*inbox
	var reps []*replica
	for range 3 {
		in := newInbox()
		inboxes = append(inboxes, in)
		reps = append(reps, cl.start(func(ch *Plugin, r chi.Router) error {
			publishRoute(ch, r)
			return ch.Subscribe("news", in.handler)
		}))
	}
	for _, rep := range reps {
		subscribed(t, rep.ch)
	}
	r := reps[1].svc.Do(t, http.MethodPost, "/publish/news", "hello", "X-Request-ID", "req-broadcast-1")
	if r.Status != http.StatusNoContent {
		t.Fatalf("publish = %d %s", r.Status, r)
	}
	for i, in := range inboxes {
		in.wait(t, 1, 5*time.Second)
		msgs, rids := in.all()
		m := msgs[0]
		if string(m.Payload) != "hello" || m.Channel != "news" || m.ID != "" || m.Delivery != 1 {
			t.Errorf("replica %d got %+v", i, m)
		}
		if m.RequestID != "req-broadcast-1" || rids[0] != "req-broadcast-1" {
			t.Errorf("replica %d: request ID in message %q, in context %q; want req-broadcast-1", i, m.RequestID, rids[0])
		}
		if d := time.Since(m.Published); d < 0 || d > time.Minute {
			t.Errorf("replica %d: published %s ago", i, d)
		}
	}
}

// Messages published one after another on a channel reach every replica in
// that order.
func TestBroadcastOrder(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", `broadcast = ["ticks"]`)
	a, b := newInbox(), newInbox()
	ra := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("ticks", a.handler) })
	rb := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("ticks", b.handler) })
	subscribed(t, ra.ch)
	subscribed(t, rb.ch)
	const n = 300
	want := make([]string, n)
	for i := range n {
		want[i] = strconv.Itoa(i)
		if err := ra.ch.Publish(context.Background(), "ticks", []byte(want[i])); err != nil {
			t.Fatal(err)
		}
	}
	for name, in := range map[string]*inbox{"a": a, "b": b} {
		in.wait(t, n, 10*time.Second)
		if got := strings.Join(in.payloads(), ","); got != strings.Join(want, ",") {
			t.Errorf("replica %s got them out of order: %s", name, got)
		}
	}
}

// A payload over max_payload_bytes is refused before anything is sent: a 413
// through a route, and no replica hears of it.
func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"news\"]\ndurable = [\"orders\"]\nmax_payload_bytes = 16")
	in := newInbox()
	rep := cl.start(func(ch *Plugin, r chi.Router) error {
		publishRoute(ch, r)
		return ch.Subscribe("news", in.handler)
	})
	subscribed(t, rep.ch)
	for _, channel := range []string{"news", "orders"} {
		err := rep.ch.Publish(context.Background(), channel, []byte(strings.Repeat("x", 17)))
		var tl *PayloadTooLargeError
		if !errors.As(err, &tl) || tl.Size != 17 || tl.Max != 16 {
			t.Fatalf("publish 17 bytes on %s = %v, want a PayloadTooLargeError", channel, err)
		}
		r := rep.svc.Do(t, http.MethodPost, "/publish/"+channel, strings.Repeat("x", 17))
		if r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(r.String(), "at most 16") {
			t.Fatalf("POST a 17-byte event = %d %s", r.Status, r)
		}
	}
	if err := rep.ch.Publish(context.Background(), "news", []byte(strings.Repeat("x", 16))); err != nil {
		t.Fatalf("16 bytes: %v", err)
	}
	in.wait(t, 1, 5*time.Second)
	if in.len() != 1 || len(in.payloads()[0]) != 16 {
		t.Fatalf("the handler got %q, want only the 16-byte message", in.payloads())
	}
	n, err := rep.ch.client.XLen(context.Background(), cl.prefix+"orders").Result()
	if err != nil || n != 0 {
		t.Fatalf("the durable stream holds %d entries (%v), want none", n, err)
	}
}

// Publishing or subscribing to a channel that is not declared is refused,
// and the refusal says how to declare it.
func TestUndeclaredChannel(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", `broadcast = ["news"]`)
	rep := cl.start(func(ch *Plugin, r chi.Router) error { publishRoute(ch, r); return nil })
	err := rep.ch.Publish(context.Background(), "newz", []byte("x"))
	var ue *UndeclaredError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "[plugin.channels] broadcast") {
		t.Fatalf("publish on an undeclared channel = %v", err)
	}
	if err := rep.ch.Subscribe("newz", newInbox().handler); !errors.As(err, &ue) {
		t.Fatalf("subscribe to an undeclared channel = %v", err)
	}
	if _, err := rep.ch.SSE("newz", SSEOpts{}); !errors.As(err, &ue) {
		t.Fatalf("SSE of an undeclared channel = %v", err)
	}
	if r := rep.svc.Do(t, http.MethodPost, "/publish/newz", "x"); r.Status != 500 || strings.Contains(r.String(), "declared") {
		t.Fatalf("POST to an undeclared channel = %d %s; want a 500 without details", r.Status, r)
	}
	if err := rep.ch.Subscribe("news", newInbox().handler); err != nil {
		t.Fatal(err)
	}
	if err := rep.ch.Subscribe("news", newInbox().handler); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("a second handler for news = %v", err)
	}
}

// A handler that panics is recovered (the next message is handled), one
// that outlives handler_timeout sees its context end, and their outcomes are
// what the metrics count.
func TestHandlerPanicAndTimeout(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "broadcast = [\"work\"]\nhandler_timeout = \"200ms\"\nvisibility_timeout = \"1s\"")
	in := newInbox()
	ctxErr := make(chan error, 1)
	rep := cl.start(func(ch *Plugin, r chi.Router) error {
		return ch.Subscribe("work", func(ctx context.Context, m Message) error {
			switch string(m.Payload) {
			case "panic":
				panic("boom")
			case "slow":
				<-ctx.Done()
				ctxErr <- context.Cause(ctx)
				return ctx.Err()
			}
			in.add(ctx, m)
			return nil
		})
	})
	subscribed(t, rep.ch)
	for _, p := range []string{"panic", "slow", "after"} {
		if err := rep.ch.Publish(context.Background(), "work", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	in.wait(t, 1, 5*time.Second)
	var te *TimeoutError
	if err := <-ctxErr; !errors.As(err, &te) || te.Timeout != 200*time.Millisecond {
		t.Fatalf("the slow handler's context ended with %v, want a TimeoutError", err)
	}
	logs := rep.svc.Logs()
	if !strings.Contains(logs, "handler panicked") || !strings.Contains(logs, "boom") {
		t.Errorf("the panic is not logged:\n%s", logs)
	}
	// A handler's outcome is counted once it has returned, a moment after
	// the inbox saw its message.
	wants := []string{
		`jfast_channels_handled_total{channel="work",outcome="panic"} 1`,
		`jfast_channels_handled_total{channel="work",outcome="timeout"} 1`,
		`jfast_channels_handled_total{channel="work",outcome="ok"} 1`,
		`jfast_channels_published_total{channel="work",outcome="ok"} 3`,
		`jfast_channels_publish_duration_seconds_count{channel="work"} 3`,
	}
	waitFor(t, 5*time.Second, "/metrics counts every outcome: "+strings.Join(wants, ", "), func() bool {
		metrics := rep.svc.Get(t, "/metrics").String()
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				return false
			}
		}
		return true
	})
}

// The 503 a publish renders names channels and says nothing of the cause.
func TestUnavailableErrorProblem(t *testing.T) {
	err := &UnavailableError{Channel: "news", Err: fmt.Errorf("dial tcp 10.0.0.7:6379: connect: connection refused")}
	p, ok := problem.As(err)
	if !ok || p.Status != 503 || p.Extensions["dependency"] != "channels" || strings.Contains(p.Detail, "10.0.0.7") {
		t.Fatalf("problem = %+v", p)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatal("does not match ErrUnavailable")
	}
}
