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
	conn, ch, lock := lockSetup(t)
	publishLock(t, ch, lock, "q/other")
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

// lockSetup declares a lock queue of the test's own on the machine's
// RabbitMQ, deleted when the test ends, and returns a confirm-mode channel.
func lockSetup(t *testing.T) (*amqp.Connection, *amqp.Channel, string) {
	t.Helper()
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
	// Confirmed, so each message is in the queue before free's channel looks.
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return conn, ch, lock
}

func publishLock(t *testing.T, ch *amqp.Channel, lock, id string) {
	t.Helper()
	if dc, err := ch.PublishWithDeferredConfirm("", lock, false, false, amqp.Publishing{Body: []byte(id)}); err != nil || !dc.Wait() {
		t.Fatalf("lock publish of %s not confirmed: %v", id, err)
	}
}

// A lock that took two IDs (enqueues of two processes racing: the second's
// publish landed while the first's ID was unacked, read by a third) is
// freed of each job's own ID wherever it lies: before the change the
// release of the second ID found the first, put it back and stopped, and the
// key stayed held by a finished job for good.
func TestRabbitMQReleaseFreesItsIDFromALockHoldingTwo(t *testing.T) {
	t.Parallel()
	conn, ch, lock := lockSetup(t)
	publishLock(t, ch, lock, "q/first")
	reader, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := reader.Get(lock, false)
	if err != nil || !ok {
		t.Fatalf("get the first ID: %v, %v", ok, err)
	}
	publishLock(t, ch, lock, "q/second") // the limit counts only ready messages
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	// Closing the channel waits for the broker: its nack has been handled.
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	if qi, err := ch.QueueDeclarePassive(lock, true, false, false, false, nil); err != nil || qi.Messages != 2 {
		t.Fatalf("lock = %+v, %v; want two IDs in it", qi, err)
	}
	b := &rabbitBackend{}
	st := &rmqState{conn: conn, adminMu: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.free(ctx, st, lock, "q/second", true); err != nil {
		t.Fatal(err)
	}
	if qi, err := ch.QueueDeclarePassive(lock, true, false, false, false, nil); err != nil || qi.Messages != 1 {
		t.Fatalf("lock after releasing the second ID: %+v, %v; want the first alone", qi, err)
	}
	if err := b.free(ctx, st, lock, "q/first", true); err != nil {
		t.Fatal(err)
	}
	if _, err = ch.QueueDeclarePassive(lock, true, false, false, false, nil); !isNotFound(err) {
		t.Fatalf("lock after releasing both IDs: %v, want the queue deleted", err)
	}
}
