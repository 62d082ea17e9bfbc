package channels

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/jfastframework/jfast/framework"
)

// Three replicas of one service and one replica of another subscribe to a
// durable channel: each message is handled once per service, by one of its
// replicas, and acknowledged.
func TestDurableOncePerService(t *testing.T) {
	t.Parallel()
	orders := newCluster(t, "", `durable = ["order.paid"]`)
	billing := *orders
	billing.toml += "\ngroup = \"billing\""
	var mu sync.Mutex
	count := map[string]int{} // payload → handled by orders' replicas
	perReplica := make([]int, 3)
	var reps []*replica
	for i := range 3 {
		reps = append(reps, orders.start(func(ch *Plugin, r chi.Router) error {
			return ch.Subscribe("order.paid", func(ctx context.Context, m Message) error {
				mu.Lock()
				count[string(m.Payload)]++
				perReplica[i]++
				mu.Unlock()
				return nil
			})
		}))
	}
	other := newInbox()
	rb := billing.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("order.paid", other.handler) })
	for _, rep := range append(reps, rb) {
		subscribed(t, rep.ch)
	}
	const n = 60
	for i := range n {
		ctx := requestIDContext("req-" + strconv.Itoa(i))
		if err := reps[i%3].ch.Publish(ctx, "order.paid", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	other.wait(t, n, 10*time.Second)
	waitFor(t, 10*time.Second, "every message handled by orders", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(count) == n
	})
	time.Sleep(200 * time.Millisecond) // room for a duplicate to show
	mu.Lock()
	for p, c := range count {
		if c != 1 {
			t.Errorf("message %s handled %d times by orders", p, c)
		}
	}
	t.Logf("spread over orders' replicas: %v", perReplica)
	mu.Unlock()
	msgs, rids := other.all()
	for i, m := range msgs {
		if m.ID == "" || m.Delivery != 1 || "req-"+string(m.Payload) != m.RequestID || rids[i] != m.RequestID {
			t.Fatalf("billing got %+v with context request ID %q", m, rids[i])
		}
	}
	for _, group := range []string{"chantest", "billing"} {
		waitFor(t, 5*time.Second, group+" has nothing pending", func() bool {
			p, err := reps[0].ch.client.XPending(context.Background(), orders.prefix+"order.paid", group).Result()
			return err == nil && p.Count == 0
		})
	}
}

func requestIDContext(id string) context.Context {
	return requestIDNewContext(context.Background(), id)
}

// One replica handles a durable channel's messages in the order they were
// published; messages published while no replica ran are handled when one
// starts.
func TestDurableOrderAndBacklog(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", `durable = ["ticks"]`)
	// The group exists from the first subscription on.
	first := cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("ticks", newInbox().handler) })
	subscribed(t, first.ch)
	if err := first.svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	pub := cl.start(nil)
	const n = 200
	want := make([]string, n)
	for i := range n {
		want[i] = strconv.Itoa(i)
		if err := pub.ch.Publish(context.Background(), "ticks", []byte(want[i])); err != nil {
			t.Fatal(err)
		}
	}
	in := newInbox()
	cl.start(func(ch *Plugin, r chi.Router) error { return ch.Subscribe("ticks", in.handler) })
	in.wait(t, n, 15*time.Second)
	if got := strings.Join(in.payloads(), ","); got != strings.Join(want, ",") {
		t.Fatalf("handled out of order: %s", got)
	}
}

// A handler that keeps failing: its message is delivered max_deliveries
// times (each after visibility_timeout), then moved to the dead letter
// stream with why; a permanent failure goes there at once.
func TestDurableDeadLetter(t *testing.T) {
	t.Parallel()
	cl := newCluster(t, "", "durable = [\"jobs\"]\nmax_deliveries = 3\nhandler_timeout = \"200ms\"\nvisibility_timeout = \"500ms\"\nhealth_check_interval = \"100ms\"")
	var mu sync.Mutex
	deliveries := map[string][]int{}
	rep := cl.start(func(ch *Plugin, r chi.Router) error {
		return ch.Subscribe("jobs", func(ctx context.Context, m Message) error {
			mu.Lock()
			deliveries[string(m.Payload)] = append(deliveries[string(m.Payload)], m.Delivery)
			mu.Unlock()
			if string(m.Payload) == "poison" {
				return framework.Permanent(errors.New("cannot parse"))
			}
			return errors.New("downstream refused")
		})
	})
	subscribed(t, rep.ch)
	for _, p := range []string{"flaky", "poison"} {
		if err := rep.ch.Publish(context.Background(), "jobs", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	dead := cl.prefix + "jobs:dead"
	var entries []redis.XMessage
	waitFor(t, 15*time.Second, "both messages in the dead letter", func() bool {
		var err error
		entries, err = rep.ch.client.XRange(context.Background(), dead, "-", "+").Result()
		return err == nil && len(entries) == 2
	})
	byPayload := map[string]map[string]any{}
	for _, e := range entries {
		byPayload[e.Values["payload"].(string)] = e.Values
	}
	if v := byPayload["poison"]; v["dead:deliveries"] != "1" || v["dead:error"] != "permanent: cannot parse" || v["dead:group"] != "chantest" {
		t.Errorf("poison dead letter = %v", v)
	}
	if v := byPayload["flaky"]; v["dead:deliveries"] != "3" || v["dead:error"] != "downstream refused" {
		t.Errorf("flaky dead letter = %v", v)
	}
	mu.Lock()
	if got := fmt.Sprint(deliveries["flaky"]); got != "[1 2 3]" {
		t.Errorf("flaky delivered %s, want [1 2 3]", got)
	}
	if got := fmt.Sprint(deliveries["poison"]); got != "[1]" {
		t.Errorf("poison delivered %s, want [1]", got)
	}
	mu.Unlock()
	p, err := rep.ch.client.XPending(context.Background(), cl.prefix+"jobs", "chantest").Result()
	if err != nil || p.Count != 0 {
		t.Fatalf("pending after the dead letter: %+v %v", p, err)
	}
	if m := rep.svc.Get(t, "/metrics").String(); !strings.Contains(m, `jfast_channels_dead_lettered_total{channel="jobs"} 2`) {
		t.Errorf("/metrics does not count the dead letters")
	}
}
