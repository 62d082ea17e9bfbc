package channels

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jfastframework/jfast/jfasttest"
)

// An SSEOpts.Filter that panics while a stream catches up (Last-Event-ID)
// gives the page's catch-up place back: after as many such panics as the
// channel has places, a stream resuming past the bad entry still gets what
// follows, and the streams that panicked are counted closed (reason
// "panic"), not left open in jfast_channels_sse_clients.
func TestCatchUpPanicGivesItsPlaceBack(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"orders\"]")
	filter := func(_ *http.Request, m Message) bool {
		if string(m.Payload) == "boom" {
			panic("filter: bad payload")
		}
		return true
	}
	rep := cl.start(sseRoutes(SSEOpts{Filter: filter}, "orders"))
	subscribed(t, rep.ch)
	ctx := context.Background()
	if err := rep.ch.Publish(ctx, "orders", []byte("boom")); err != nil {
		t.Fatal(err)
	}
	boomID, err := lastID(ctx, rep.ch.client, rep.ch.chans["orders"].key)
	if err != nil {
		t.Fatal(err)
	}
	h := rep.ch.chans["orders"].hub
	places := cap(h.catchUps)
	for i := range places {
		if c := openSSE(t, rep.svc.URL+"/events/orders", "Last-Event-ID", "0-0"); !c.ended(10 * time.Second) {
			t.Fatalf("stream %d did not end after its filter panicked", i)
		}
	}
	if err := rep.ch.Publish(ctx, "orders", []byte("after")); err != nil {
		t.Fatal(err)
	}
	c := openSSE(t, rep.svc.URL+"/events/orders", "Last-Event-ID", boomID)
	if ev := c.next(t, 10*time.Second); ev.data != "after" {
		t.Fatalf("got %+v, want the entry after %s", ev, boomID)
	}
	reg := rep.svc.Metrics()
	if n := jfasttest.Metric(t, reg, "jfast_channels_sse_closed_total", "channel", "orders", "reason", "panic"); n != float64(places) {
		t.Errorf("jfast_channels_sse_closed_total{reason=panic} = %v, want %d", n, places)
	}
	if n := jfasttest.Metric(t, reg, "jfast_channels_sse_clients", "channel", "orders"); n != 1 {
		t.Errorf("jfast_channels_sse_clients = %v with one stream open, want 1", n)
	}
}
