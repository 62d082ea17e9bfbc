package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// DefaultTunnelIdleTimeout is the default of tunnel_idle_timeout: nginx's
// default proxy_read_timeout, which WebSocket applications are already
// written to ping within.
const DefaultTunnelIdleTimeout = 60 * time.Second

// A tunnel is a connection the upstream switched protocols on (a WebSocket):
// after the 101 the ReverseProxy copies bytes both ways until either side
// closes. The upstream call ends at the 101, so the tunnel takes a place in
// the upstream's bulkhead of its own for as long as it lasts (tunnels count
// against max_concurrent like calls), and a watch closes it after
// tunnel_idle_timeout without a byte either way.
type tunnel struct {
	io.ReadWriteCloser // the upstream's side
	permit             resilience.Permit
	rc                 *http.ResponseController
	watch              *resilience.IdleWatch // touched by a byte either way
	once               sync.Once
	m                  *routeMetrics
}

// errTunnelRefused is the cause of a 101 the gateway did not pass on.
var errTunnelRefused = errors.New("the upstream switched protocols")

// openTunnel runs on an upstream's 101 to an upgrade request: the only point
// at which the connection is handed over. It takes the tunnel's bulkhead
// place (waiting bulkhead_wait at most, as a call does), lifts the
// connection's request deadlines and starts the idle watch. An error makes
// the ReverseProxy close the upstream's connection and answer the client
// with the route's problem, nothing switched.
func (rt *route) openTunnel(c *call, resp *http.Response) error {
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok || c.rc == nil {
		return nil // the ReverseProxy refuses it with its own error
	}
	permit, err := rt.bulkhead.Acquire(c)
	if err != nil {
		return fmt.Errorf("%w, but no tunnel may open: %w", errTunnelRefused, err)
	}
	// The connection is handed over: each side is bounded by the idle
	// watch, not by the request's deadlines, which the framework set on it.
	_ = c.rc.SetReadDeadline(time.Time{})
	_ = c.rc.SetWriteDeadline(time.Time{})
	t := &tunnel{ReadWriteCloser: conn, permit: permit, rc: c.rc, m: rt.m}
	// The watch's timer is made here, before the client sees the 101, so
	// a test clock moved after it finds the timer.
	t.watch = resilience.WatchIdle(rt.p.clock, rt.p.cfg.TunnelIdleTimeout, t.closeIdle)
	rt.m.tunnels.Inc()
	c.tun = t
	resp.Body = t
	return nil
}

// Read reads what the upstream sends the client.
func (t *tunnel) Read(p []byte) (int, error) {
	n, err := t.ReadWriteCloser.Read(p)
	if n > 0 {
		t.watch.Touch()
	}
	return n, err
}

// Write writes what the client sends the upstream.
func (t *tunnel) Write(p []byte) (int, error) {
	n, err := t.ReadWriteCloser.Write(p)
	if n > 0 {
		t.watch.Touch()
	}
	return n, err
}

// closeIdle closes the tunnel after tunnel_idle_timeout without a byte
// either way. Closing the upstream's side ends the copy from it; the
// client's side is given a past deadline, so a copy blocked writing to a
// client that stopped reading, or reading from one that sends nothing, ends
// too.
func (t *tunnel) closeIdle() {
	t.m.tunnelsIdle.Inc()
	_ = t.ReadWriteCloser.Close()
	_ = t.rc.SetReadDeadline(time.Unix(1, 0))
	_ = t.rc.SetWriteDeadline(time.Unix(1, 0))
}

// close ends the tunnel once the ReverseProxy is done with it: the watch
// stops, the bulkhead place is given back. Safe on a nil tunnel.
func (t *tunnel) close() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		// The ReverseProxy closes the upstream's side, except when it
		// refused the switch (another protocol than asked for).
		_ = t.ReadWriteCloser.Close()
		t.watch.Stop()
		t.permit.Release()
		t.m.tunnels.Dec()
	})
}

// handshakeTransport holds an upgrade request's upstream call on a route
// that is not a stream to the request's deadline (the call's context has
// none, so that a tunnel can outlive it). Any answer but a 101 keeps that
// deadline while its body is read.
type handshakeTransport struct{ rt http.RoundTripper }

func (h handshakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := callOf(req.Context())
	if c == nil || c.handshake.IsZero() {
		return h.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithDeadline(req.Context(), c.handshake)
	resp, err := h.rt.RoundTrip(req.WithContext(ctx))
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		// A switched connection is no longer the call's: cancelling the
		// handshake's context leaves it open.
		cancel()
		return resp, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends its context when closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
