package drills

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The machine's RabbitMQ is never paused: drills reach it through a Proxy. A
// blackholed broker leaves the connection open and answers nothing (a publish
// confirmation never comes); after Pass a new connection works at once.
func TestRabbitMQThroughTheProxy(t *testing.T) {
	t.Parallel()
	p, err := StartProxy("127.0.0.1:5672")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	url := "amqp://guest:guest@" + p.Addr() + "/"
	dial := func() (*amqp.Connection, error) {
		return amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(2 * time.Second), Heartbeat: 10 * time.Second})
	}
	conn, err := dial()
	if err != nil {
		t.Fatalf("RabbitMQ through the proxy (is the machine's RabbitMQ on 5672?): %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(wait time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		// The default exchange with no queue bound: the broker confirms and drops it.
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "jfast-drill-nobody", false, false, amqp.Publishing{Body: []byte("x")})
		if err != nil {
			return err
		}
		ok, err := c.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("nacked")
		}
		return nil
	}
	if err := publish(5 * time.Second); err != nil {
		t.Fatalf("publish before the fault: %v", err)
	}
	if err := p.Blackhole(); err != nil {
		t.Fatal(err)
	}
	if err := publish(300 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish to a blackholed broker: want a deadline error, got %v", err)
	}
	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	conn2, err := dial()
	if err != nil {
		t.Fatalf("a new connection after Pass: %v", err)
	}
	conn2.Close()
}
