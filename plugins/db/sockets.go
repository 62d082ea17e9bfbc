package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jfastframework/jfast/framework/resilience"
)

// The sockets pgconn opens besides a connection's own, and those it may
// keep waiting on a server that does not answer, with what ends them.
//
// When a connection breaks in use (a statement's deadline, a reset, a cut),
// pgconn closes it in the background: it sends a cancel request for the
// statement on a new socket to the server, waiting for the server to close
// that socket, then a Terminate, reading until the server closes the
// connection, each for up to 15 s. pgxpool keeps the connection's pool slot
// (and its Close waits) until that is over. On a server that stopped
// answering it is all 15 s: a slot lost for 15 s after a ping was cut, and a
// Stop that waits out plugin_stop_timeout. So:
//
//   - A connection whose socket the plugin closed because the server did not
//     answer (its ping got no answer within ping_timeout, or the watchdog cut
//     it) sends no cancel request: there is nobody to ask, and its statement
//     is gone with the socket. Its slot frees as soon as pgxpool destroys it.
//   - Any other cancel request is bounded by ping_timeout (how long a healthy
//     server may take to answer: it closes a cancel socket at once).
//   - The gate's close (the plugin's Stop, a tenant pool's eviction) ends the
//     cancel requests in flight, and the connects in progress: pgxpool opens
//     min_idle connections on a context that nothing cancels, bounded only by
//     connect_timeout. (gate.broken then ends the drains of broken
//     connections.)
//
// This is the pool's DialFunc, per connection (installed by BeforeConnect):
// the dials before the connection is up are its connect, those after are its
// cancel requests (pgconn dials those with the connection's DialFunc).

// errNoCancel is what a cancel request the plugin refuses to send returns to
// pgconn, which ignores it and goes on closing the connection.
var errNoCancel = errors.New("db: no cancel request: the plugin closed the connection because the server did not answer, or the pool is closing")

// dialer returns the DialFunc of one connection whose slot is s.
func (g *gate) dialer(s *connSlot, dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if s.up.Load() {
			return g.dialCancel(ctx, s, dial, network, addr)
		}
		return g.dialConnect(ctx, s, dial, network, addr)
	}
}

// dialConnect dials the connection's socket, which the gate's close closes
// until the connection is up (see connected).
//
// The socket gets the connect's deadline (connectBy: connect_timeout from
// its start), cleared once the connection is up: pgconn gives each host of a
// multi-host connection string a connect_timeout of its own, so two hosts
// that do not answer would cost twice connect_timeout, three the request's
// whole 30 s. Here the hosts share it: one tried once it has passed is not
// dialled.
func (g *gate) dialConnect(ctx context.Context, s *connSlot, dial pgconn.DialFunc, network, addr string) (net.Conn, error) {
	var cancel context.CancelFunc
	if s.connectBy.IsZero() {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithDeadline(ctx, s.connectBy)
	}
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("db: connect_timeout %s used up before %s was dialled: %w", g.connectTimeout, addr, err)
	}
	stop := context.AfterFunc(g.stopCtx, cancel)
	conn, err := dial(ctx, network, addr)
	stop()
	if err != nil {
		return nil, s.connectTimedOut(err)
	}
	if g.stopCtx.Err() != nil {
		_ = conn.Close()
		return nil, errPoolClosed
	}
	if !s.connectBy.IsZero() {
		_ = conn.SetDeadline(s.connectBy)
	}
	closeOnStop := context.AfterFunc(g.stopCtx, func() { _ = conn.Close() })
	s.cancelMu.Lock()
	s.connecting = closeOnStop
	s.cancelMu.Unlock()
	return &connectingConn{stoppingConn: stoppingConn{Conn: conn, stop: closeOnStop}, g: g, s: s}, nil
}

// connectingConn is a connection's own socket: it notes whether the server
// sent anything before the connection was up, and, closed before then (the
// connect failed: pgconn closes the socket), concludes the connect.
type connectingConn struct {
	stoppingConn
	g *gate
	s *connSlot
}

func (c *connectingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.s.answered.Load() {
		c.s.answered.Store(true)
	}
	return n, c.s.connectTimedOut(err)
}

// connectTimedOut is err, of the connect's socket before the connection is
// up, saying that connect_timeout ended it when it did: a
// context.DeadlineExceeded, as pgconn's own bound on a host makes it. The
// connect's deadline on the socket (see dialConnect) comes before pgconn's,
// and would otherwise end it with a bare i/o timeout.
func (s *connSlot) connectTimedOut(err error) error {
	var ne net.Error
	if err == nil || s.up.Load() || s.connectBy.IsZero() || time.Now().Before(s.connectBy) ||
		errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	return fmt.Errorf("%w (connect_timeout): %w", context.DeadlineExceeded, err)
}

func (c *connectingConn) Close() error {
	err := c.stoppingConn.Close()
	if !c.s.up.Load() {
		switch {
		case c.g.stopCtx.Err() != nil:
			c.g.endConnect(c.s, resilience.Ignore) // the gate closed it
		case c.s.answered.Load():
			c.g.endConnect(c.s, resilience.Failure) // refused: authentication, no such database
		default:
			c.g.endConnect(c.s, resilience.Hang) // no answer within connect_timeout
		}
	}
	return err
}

// adoptConnect gives s's connect, still in progress, the breaker's ticket of
// the attempt it was started for, whose caller's deadline ended first: the
// connect goes on in the background (up to connect_timeout), and what it
// meets is the evidence the attempt could not wait for. A server that
// accepts connections and never answers is then found by callers whose
// deadlines are all shorter than connect_timeout (an idempotency store's
// store_timeout, a short request), instead of never. It reports false when
// the connect has already ended: the ticket is the caller's to conclude.
func (s *connSlot) adoptConnect(t resilience.Ticket) bool {
	s.cancelMu.Lock()
	defer s.cancelMu.Unlock()
	if s.connectEnded || s.up.Load() {
		return false
	}
	s.orphan = &t
	return true
}

// expireAdopted concludes the ticket adoptConnect gave s as a hang, unless
// the connect ended first: the bound of the attempt that left it passed
// with no answer. The connect itself runs on; its end then concludes
// nothing.
func (g *gate) expireAdopted(s *connSlot) {
	s.cancelMu.Lock()
	t := s.orphan
	s.orphan = nil
	s.cancelMu.Unlock()
	if t == nil {
		return
	}
	t.Done(resilience.Hang)
	g.suspect.Store(true)
	if g.onConnectEnd != nil {
		g.onConnectEnd(resilience.Hang)
	}
}

// endConnect records that s's connect ended with o (Success once the
// connection is up) and concludes the ticket adoptConnect gave it, if any.
func (g *gate) endConnect(s *connSlot, o resilience.Outcome) {
	s.cancelMu.Lock()
	if s.connectEnded {
		s.cancelMu.Unlock()
		return
	}
	s.connectEnded = true
	t := s.orphan
	s.orphan = nil
	s.cancelMu.Unlock()
	if t == nil {
		return
	}
	t.Done(o)
	if o == resilience.Hang || o == resilience.Failure {
		g.suspect.Store(true)
	}
	if g.onConnectEnd != nil {
		g.onConnectEnd(o)
	}
}

// dialCancel dials the socket of a cancel request for s's connection, or
// refuses (see errNoCancel). The request ends within ping_timeout, when the
// connection is cut, or when the gate closes.
func (g *gate) dialCancel(ctx context.Context, s *connSlot, dial pgconn.DialFunc, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, g.pingTimeout)
	s.cancelMu.Lock()
	refuse := s.noCancel || g.stopCtx.Err() != nil
	if !refuse {
		s.stopCancel = cancel
	}
	s.cancelMu.Unlock()
	if refuse {
		cancel()
		return nil, errNoCancel
	}
	stopOnClose := context.AfterFunc(g.stopCtx, cancel)
	end := func() bool {
		stopOnClose()
		cancel()
		s.cancelMu.Lock()
		s.stopCancel = nil
		s.cancelMu.Unlock()
		return true
	}
	conn, err := dial(ctx, network, addr)
	if err != nil {
		end()
		return nil, err
	}
	closeOnEnd := context.AfterFunc(ctx, func() { _ = conn.Close() })
	return &stoppingConn{Conn: conn, stop: func() bool { closeOnEnd(); return end() }}, nil
}

// connected is the connection's ValidateConnect (chained before next, the
// connection string's own): the connection is up, its later dials are cancel
// requests, and the gate's close no longer closes its socket.
func (g *gate) connected(s *connSlot, next pgconn.ValidateConnectFunc) pgconn.ValidateConnectFunc {
	return func(ctx context.Context, pc *pgconn.PgConn) error {
		s.cancelMu.Lock()
		stop := s.connecting
		s.connecting = nil
		s.cancelMu.Unlock()
		if stop != nil && !stop() {
			return errPoolClosed // the gate closed the socket
		}
		if next != nil {
			if err := next(ctx, pc); err != nil {
				return err
			}
		}
		if !s.connectBy.IsZero() {
			_ = pc.Conn().SetDeadline(time.Time{}) // the connect's (see dialConnect)
		}
		pc.CustomData()[heldKey] = s
		s.up.Store(true)
		g.endConnect(s, resilience.Success)
		return nil
	}
}

// prepareConnect is the pool's BeforeConnect part that gives the connection
// its slot and its DialFunc.
func (g *gate) prepareConnect(cc *pgx.ConnConfig) *connSlot {
	s := new(connSlot)
	if g.connectTimeout > 0 {
		s.connectBy = time.Now().Add(g.connectTimeout)
	}
	cc.DialFunc = g.dialer(s, cc.DialFunc)
	cc.ValidateConnect = g.connected(s, cc.ValidateConnect)
	return s
}

// cutCancel is called before the plugin closes the socket of s's
// connection because the server did not answer: no cancel request is sent
// for it, and one in flight ends.
func (s *connSlot) cutCancel() {
	s.cancelMu.Lock()
	s.noCancel = true
	stop := s.stopCancel
	s.cancelMu.Unlock()
	if stop != nil {
		stop()
	}
}

// stoppingConn is a socket that stops what watches it when closed.
type stoppingConn struct {
	net.Conn
	stop func() bool
}

func (c *stoppingConn) Close() error {
	c.stop()
	return c.Conn.Close()
}
