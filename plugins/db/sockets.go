package db

import (
	"context"
	"errors"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
func (g *gate) dialConnect(ctx context.Context, s *connSlot, dial pgconn.DialFunc, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(g.stopCtx, cancel)
	conn, err := dial(ctx, network, addr)
	stop()
	if err != nil {
		return nil, err
	}
	if g.stopCtx.Err() != nil {
		_ = conn.Close()
		return nil, errPoolClosed
	}
	closeOnStop := context.AfterFunc(g.stopCtx, func() { _ = conn.Close() })
	s.cancelMu.Lock()
	s.connecting = closeOnStop
	s.cancelMu.Unlock()
	return &stoppingConn{Conn: conn, stop: closeOnStop}, nil
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
		pc.CustomData()[heldKey] = s
		s.up.Store(true)
		return nil
	}
}

// prepareConnect is the pool's BeforeConnect part that gives the connection
// its slot and its DialFunc.
func (g *gate) prepareConnect(cc *pgx.ConnConfig) {
	s := new(connSlot)
	cc.DialFunc = g.dialer(s, cc.DialFunc)
	cc.ValidateConnect = g.connected(s, cc.ValidateConnect)
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
