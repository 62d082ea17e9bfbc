package queue

// The rabbitmq backend's connection layer: one link per role (publishing,
// consuming) keeps a connection up, re-dials it with backoff when it is lost
// and hands its channels to callers, each use bounded by the caller's context.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rmqState is one live connection with its channels.
type rmqState struct {
	conn *amqp.Connection
	// pub is the confirm-mode publishing channel (publish link only).
	pub *amqp.Channel
	// admin runs RPCs (declare, get, delete) one at a time: adminMu is a
	// one-slot lock that a waiter can give up on.
	admin    *amqp.Channel
	adminMu  chan struct{}
	declared sync.Map
}

// adminDo runs fn on the admin channel, bounded by ctx. When ctx ends first fn
// keeps the channel until it returns (at the latest when the connection is
// closed: heartbeat loss or Close).
func (st *rmqState) adminDo(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	select {
	case st.adminMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-st.adminMu }()
		if st.admin == nil || st.admin.IsClosed() {
			ch, err := st.conn.Channel()
			if err != nil {
				done <- err
				return
			}
			st.admin = ch
		}
		done <- fn(st.admin)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tempDo runs fn on a channel of its own, closed afterwards (which returns
// every message fn got and did not ack to its queue), bounded by ctx.
func (st *rmqState) tempDo(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	done := make(chan error, 1)
	go func() {
		ch, err := st.conn.Channel()
		if err != nil {
			done <- err
			return
		}
		err = fn(ch)
		_ = ch.Close()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rmqLink keeps one connection up: it dials, declares the topology, hands the
// state to callers, watches for its loss and dials again with backoff.
type rmqLink struct {
	b    *rabbitBackend
	role string

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	st      *rmqState
	ready   chan struct{} // closed while st != nil
	lastErr error
	dialing *amqp.Connection
}

func newLink(b *rabbitBackend, role string) *rmqLink {
	ctx, cancel := context.WithCancel(context.Background())
	return &rmqLink{b: b, role: role, ctx: ctx, cancel: cancel, done: make(chan struct{}), ready: make(chan struct{})}
}

func (l *rmqLink) run() {
	defer close(l.done)
	log := l.b.env.Logger
	for failures := 0; ; {
		st, err := l.connect()
		if l.ctx.Err() != nil {
			if st != nil {
				_ = st.conn.CloseDeadline(time.Now().Add(time.Second))
			}
			return
		}
		if err != nil {
			failures++
			l.mu.Lock()
			l.lastErr = err
			l.mu.Unlock()
			if failures == 1 || failures%20 == 0 {
				log.Warn("rabbitmq connection failed; retrying with backoff", "role", l.role, "broker", redactURL(l.b.cfg.URL), "failures", failures, "error", err.Error())
			}
			if l.b.clock.Sleep(l.ctx, l.b.backoff.Delay(failures)) != nil {
				return
			}
			continue
		}
		if failures > 0 {
			log.Info("rabbitmq connection re-made", "role", l.role, "after_failures", failures)
		}
		failures = 0
		connClosed := st.conn.NotifyClose(make(chan *amqp.Error, 1))
		var chClosed chan *amqp.Error
		if st.pub != nil {
			chClosed = st.pub.NotifyClose(make(chan *amqp.Error, 1))
		}
		l.mu.Lock()
		l.st, l.lastErr = st, nil
		close(l.ready)
		l.mu.Unlock()
		var reason *amqp.Error
		select {
		case <-l.ctx.Done():
		case reason = <-connClosed:
		case reason = <-chClosed:
		}
		l.mu.Lock()
		l.st = nil
		l.ready = make(chan struct{})
		l.lastErr = errors.New("connection lost")
		if reason != nil {
			l.lastErr = fmt.Errorf("connection lost: %w", reason)
		}
		l.mu.Unlock()
		_ = st.conn.CloseDeadline(time.Now().Add(time.Second))
		if l.ctx.Err() != nil {
			return
		}
		log.Warn("rabbitmq connection lost; reconnecting", "role", l.role, "error", fmt.Sprint(reason))
		failures = 1 // a short pause before dialing again
		if l.b.clock.Sleep(l.ctx, l.b.backoff.Delay(failures)) != nil {
			return
		}
	}
}

// connect dials and sets the connection up; stop aborts it.
func (l *rmqLink) connect() (*rmqState, error) {
	b := l.b
	timeout := b.cfg.ConnectTimeout
	var nc net.Conn
	var ncMu sync.Mutex
	dial := func(network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{Timeout: timeout}).DialContext(l.ctx, network, addr)
		if err != nil {
			return nil, err
		}
		_ = c.SetDeadline(time.Now().Add(timeout)) // the handshake; cleared once open
		ncMu.Lock()
		nc = c
		ncMu.Unlock()
		return c, nil
	}
	abort := context.AfterFunc(l.ctx, func() {
		ncMu.Lock()
		defer ncMu.Unlock()
		if nc != nil {
			_ = nc.Close()
		}
	})
	name := "jfast queue " + l.role
	conn, err := amqp.DialConfig(b.cfg.URL, amqp.Config{
		Heartbeat:  b.cfg.Heartbeat,
		Dial:       dial,
		Properties: amqp.Table{"connection_name": name, "product": "jfast"},
	})
	abort()
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURL(b.cfg.URL), err)
	}
	l.mu.Lock()
	l.dialing = conn
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.dialing = nil
		l.mu.Unlock()
	}()
	fail := func(what string, err error) (*rmqState, error) {
		_ = conn.CloseDeadline(time.Now().Add(time.Second))
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	st := &rmqState{conn: conn, adminMu: make(chan struct{}, 1)}
	if st.admin, err = conn.Channel(); err != nil {
		return fail("open channel", err)
	}
	if l.role == "publish" {
		if st.pub, err = conn.Channel(); err != nil {
			return fail("open publishing channel", err)
		}
		if err := st.pub.Confirm(false); err != nil {
			return fail("enable publisher confirms", err)
		}
	}
	if b.delayed.Load() == 0 {
		b.detectDelayed()
	}
	if err := b.declareTopology(st); err != nil {
		return fail("declare topology", err)
	}
	return st, nil
}

// wait returns the live connection, waiting for it until ctx ends.
func (l *rmqLink) wait(ctx context.Context) (*rmqState, error) {
	for {
		l.mu.Lock()
		st, ready, last := l.st, l.ready, l.lastErr
		l.mu.Unlock()
		if st != nil {
			return st, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("rabbitmq not connected (%v): %w", last, ctx.Err())
			}
			return nil, fmt.Errorf("rabbitmq not connected yet: %w", ctx.Err())
		case <-l.ctx.Done():
			return nil, errors.New("rabbitmq backend closed")
		}
	}
}

// waitNew returns the live connection, a new one when old was lost.
func (l *rmqLink) waitNew(ctx context.Context, old *rmqState) (*rmqState, error) {
	if !old.conn.IsClosed() && (old.pub == nil || !old.pub.IsClosed()) {
		return old, nil
	}
	for {
		st, err := l.wait(ctx)
		if err != nil || st != old {
			return st, err
		}
		select { // the supervisor has not seen the loss yet
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stop ends the link: the connection is closed (its unacked deliveries go
// back to their queues) within ctx.
func (l *rmqLink) stop(ctx context.Context) error {
	l.cancel()
	l.mu.Lock()
	conns := []*amqp.Connection{l.dialing}
	if l.st != nil {
		conns = append(conns, l.st.conn)
	}
	l.mu.Unlock()
	deadline := time.Now().Add(2 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	for _, c := range conns {
		if c != nil {
			_ = c.CloseDeadline(deadline)
		}
	}
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("rabbitmq %s connection did not close: %w", l.role, ctx.Err())
	}
}
