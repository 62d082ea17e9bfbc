package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A release frees only the lock its job holds: a lock queue that holds
// another enqueue's ID (the key was freed and taken again meanwhile) is left
// as it is, with that ID; the job's own ID is removed and the emptied queue
// deleted. On the machine's RabbitMQ, with a lock queue of the test's own.
func TestRabbitMQReleaseFreesOnlyItsOwnLock(t *testing.T) {
	t.Parallel()
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	lock := "jt.release." + hex.EncodeToString(suffix)
	t.Cleanup(func() {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(lock, false, false, false)
		}
	})
	if _, err := ch.QueueDeclare(lock, true, false, false, false, amqp.Table{"x-max-length": int64(1), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	// Confirmed, so the message is in the queue before free's channel looks.
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	if dc, err := ch.PublishWithDeferredConfirm("", lock, false, false, amqp.Publishing{Body: []byte("q/other")}); err != nil || !dc.Wait() {
		t.Fatalf("lock publish not confirmed: %v", err)
	}
	b := &rabbitBackend{}
	st := &rmqState{conn: conn, adminMu: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.free(ctx, st, lock, "q/mine", true); err != nil {
		t.Fatal(err)
	}
	// Closing the channel waits for the broker: its nack has been handled.
	if err := st.admin.Close(); err != nil {
		t.Fatal(err)
	}
	qi, err := ch.QueueDeclarePassive(lock, true, false, false, false, nil)
	if err != nil || qi.Messages != 1 {
		t.Fatalf("lock after releasing another ID: %+v, %v; want the queue with its one message", qi, err)
	}
	if d, ok, err := ch.Get(lock, false); err != nil || !ok || string(d.Body) != "q/other" {
		t.Fatalf("lock holds %q (%v, %v), want q/other", d.Body, ok, err)
	} else if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	if err := b.free(ctx, st, lock, "q/other", true); err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclarePassive(lock, true, false, false, false, nil)
	if !isNotFound(err) {
		t.Fatalf("lock after releasing its own ID: %v, want the queue deleted", err)
	}
}
