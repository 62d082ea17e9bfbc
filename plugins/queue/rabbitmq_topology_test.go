package queue_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

// What the broker holds, read with a bare client: the dead letter is a
// persistent message in P<queue>.dead, routed through the dead-letter exchange,
// with the last error and the attempts in headers; a queue no table configures
// is declared at its first enqueue and its job is there, persistent.
func TestRabbitMQBrokerView(t *testing.T) {
	t.Parallel()
	name := queuetest.QueueName(t)
	other := queuetest.QueueName(t)
	svc := startRabbitApp(t, queuetest.Config{Queue: queuetest.QueueTOML(name, 1)}, func(q *queue.Plugin) {
		_ = queue.Handle(q, "bounce", func(ctx context.Context, r queuetest.Receipt) error {
			return queue.Permanent(errors.New("550 no such mailbox"))
		})
	}, rabbitOpts{})
	q, err := queue.From(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.Enqueue(context.Background(), "bounce", queuetest.Receipt{Order: 3})
	if err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 10*time.Second, "job dead", func() bool {
		dead, err := q.DeadJobs(context.Background(), queue.DeadQuery{Queue: name})
		return err == nil && len(dead) == 1
	})
	other1, err := q.Enqueue(context.Background(), "bounce", queuetest.Receipt{Order: 4}, queue.Queue(other))
	if err != nil {
		t.Fatal(err)
	}

	conn, err := amqp.Dial(rabbitURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := ch.Get("jt."+name+".dead", false)
	if err != nil || !ok {
		t.Fatalf("get from the dead queue: ok=%v err=%v", ok, err)
	}
	if d.MessageId != res.ID || d.Type != "bounce" || d.DeliveryMode != amqp.Persistent || d.Exchange != "jt-"+name+".dead" || d.RoutingKey != name {
		t.Fatalf("dead message: id %q type %q mode %d exchange %q key %q", d.MessageId, d.Type, d.DeliveryMode, d.Exchange, d.RoutingKey)
	}
	if e, _ := d.Headers["x-jfast-error"].(string); !strings.Contains(e, "550 no such mailbox") {
		t.Fatalf("x-jfast-error = %v, headers %v", d.Headers["x-jfast-error"], d.Headers)
	}
	if a := d.Headers["x-jfast-attempts"]; a != int64(1) {
		t.Fatalf("x-jfast-attempts = %#v", a)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	w, ok, err := ch.Get("jt."+other, false)
	if err != nil || !ok {
		t.Fatalf("get from the unconfigured queue's work queue: ok=%v err=%v", ok, err)
	}
	if w.MessageId != other1.ID || w.DeliveryMode != amqp.Persistent || !strings.Contains(string(w.Body), `"order":4`) {
		t.Fatalf("work message: id %q mode %d body %s", w.MessageId, w.DeliveryMode, w.Body)
	}
	_ = w.Nack(false, true)
}

// Stopping the App while the broker hangs is bounded by plugin_stop_timeout (plus
// the connections' close deadline): the running job is cancelled, nothing
// waits on the silent broker.
func TestRabbitMQStopWhileBrokerHung(t *testing.T) {
	t.Parallel()
	proxy, err := drills.StartProxy("127.0.0.1:5672")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	name := queuetest.QueueName(t)
	var running atomic.Bool
	svc := startRabbitApp(t, queuetest.Config{App: `plugin_stop_timeout = "2s"`, Queue: queuetest.QueueTOML(name, 1)}, func(q *queue.Plugin) {
		_ = queue.Handle(q, "long", func(ctx context.Context, _ struct{}) error {
			running.Store(true)
			<-ctx.Done()
			return ctx.Err()
		})
	}, rabbitOpts{url: "amqp://guest:guest@" + proxy.Addr() + "/"})
	q, err := queue.From(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), "long", struct{}{}); err != nil {
		t.Fatal(err)
	}
	queuetest.Eventually(t, 10*time.Second, "job running", running.Load)
	if err := proxy.Blackhole(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = svc.App.Stop(context.Background())
	if took := time.Since(start); took > 7*time.Second {
		t.Fatalf("stop took %s with plugin_stop_timeout 2s and the broker hung", took)
	}
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
}
