package queue

// The rabbitmq backend's topology: the exchanges and the work, delay and dead
// queues it declares on every new connection.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// detectDelayed finds out once whether the broker has the delayed-message
// exchange, on a connection of its own: declaring an exchange of an unknown
// type is a connection error.
func (b *rabbitBackend) detectDelayed() {
	conn, err := amqp.DialConfig(b.cfg.URL, amqp.Config{Heartbeat: b.cfg.Heartbeat, Dial: amqp.DefaultDial(b.cfg.ConnectTimeout)})
	if err != nil {
		return // unknown; asked again at the next connection
	}
	defer func() { _ = conn.CloseDeadline(time.Now().Add(time.Second)) }()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	err = ch.ExchangeDeclare(b.delayedExchange(), "x-delayed-message", true, false, false, false, amqp.Table{"x-delayed-type": "direct"})
	var ae *amqp.Error
	switch {
	case err == nil:
		b.delayed.Store(1)
		b.names.Store("exchange:"+b.delayedExchange(), struct{}{})
		b.env.Logger.Info("rabbitmq has the delayed-message exchange: delayed jobs and retries go through it", "exchange", b.delayedExchange())
	case errors.As(err, &ae) && (ae.Code == amqp.CommandInvalid || ae.Code == amqp.NotFound || strings.Contains(ae.Reason, "exchange type")):
		b.delayed.Store(2)
	}
}

func (b *rabbitBackend) declareTopology(st *rmqState) error {
	ch := st.admin
	for _, x := range []string{b.cfg.Exchange, b.deadExchange()} {
		if err := ch.ExchangeDeclare(x, "direct", true, false, false, false, nil); err != nil {
			return fmt.Errorf("exchange %s: %w", x, err)
		}
		b.names.Store("exchange:"+x, struct{}{})
	}
	for _, q := range b.env.Queues {
		if err := b.declareQueue(st, ch, q); err != nil {
			return err
		}
	}
	return nil
}

// declareQueue declares q's work, delay and dead queues on ch (the admin
// channel, held by the caller) once per connection.
func (b *rabbitBackend) declareQueue(st *rmqState, ch *amqp.Channel, q string) error {
	if _, ok := st.declared.Load(q); ok {
		return nil
	}
	declare := func(name string, args amqp.Table) error {
		if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			return fmt.Errorf("queue %s: %w", name, err)
		}
		b.names.Store("queue:"+name, struct{}{})
		return nil
	}
	work := b.workQueue(q)
	if err := declare(work, nil); err != nil {
		return err
	}
	if err := ch.QueueBind(work, q, b.cfg.Exchange, false, nil); err != nil {
		return fmt.Errorf("bind %s: %w", work, err)
	}
	if b.delayed.Load() == 1 {
		if err := ch.QueueBind(work, q, b.delayedExchange(), false, nil); err != nil {
			return fmt.Errorf("bind %s to %s: %w", work, b.delayedExchange(), err)
		}
	} else {
		for _, lvl := range delayLevels {
			if err := declare(b.delayQueue(q, lvl), amqp.Table{
				"x-message-ttl":             lvl.Milliseconds(),
				"x-dead-letter-exchange":    b.cfg.Exchange,
				"x-dead-letter-routing-key": q,
			}); err != nil {
				return err
			}
		}
	}
	dead := b.deadQueue(q)
	if err := declare(dead, nil); err != nil {
		return err
	}
	if err := ch.QueueBind(dead, q, b.deadExchange(), false, nil); err != nil {
		return fmt.Errorf("bind %s: %w", dead, err)
	}
	st.declared.Store(q, struct{}{})
	return nil
}

func (b *rabbitBackend) ensureQueue(ctx context.Context, st *rmqState, q string) error {
	if _, ok := st.declared.Load(q); ok {
		return nil
	}
	return st.adminDo(ctx, func(ch *amqp.Channel) error { return b.declareQueue(st, ch, q) })
}
