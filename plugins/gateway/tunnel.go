package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework"
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

// errTunnelRefused is the cause of a 101 the gateway did not pass on; a
// problem's detail says "upstream '<name>' " and then its text.
var errTunnelRefused = errors.New("switched protocols")

// openTunnel runs on an upstream's 101: the only point at which the
// connection is handed over. A 101 to a request that asked for no upgrade,
// or to another protocol than the one asked for, is refused. Otherwise it
// takes the tunnel's bulkhead place (waiting bulkhead_wait at most, as a
// call does), removes the 101's hop-by-hop headers but for Connection:
// Upgrade and Upgrade, takes the request out of the concurrency limit,
// lifts the connection's request deadlines and starts the idle watch. An
// error makes the ReverseProxy close the upstream's connection and answer
// the client with the route's problem, nothing switched.
func (rt *route) openTunnel(c *call, resp *http.Response) error {
	asked, got := "", upgradeType(resp.Header)
	if c.upgrade {
		asked = c.in.Header.Get("Upgrade")
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	switch {
	case asked == "" || c.rc == nil:
		return fmt.Errorf("%w to %q, which the request did not ask for", errTunnelRefused, got)
	case !ok || !printable(got) || !strings.EqualFold(got, asked):
		return fmt.Errorf("%w to %q when %q was asked for", errTunnelRefused, got, asked)
	}
	permit, err := rt.bulkhead.Acquire(c)
	if err != nil {
		return fmt.Errorf("%w, but no tunnel may open: %w", errTunnelRefused, err)
	}
	// The ReverseProxy removes no hop-by-hop header from a 101: they go
	// as from any response, but for the switch itself, which the client's
	// end of the handshake needs.
	upgrade := resp.Header["Upgrade"]
	dropHop(resp.Header)
	resp.Header["Connection"], resp.Header["Upgrade"] = []string{"Upgrade"}, upgrade
	// The connections are handed over: each side is bounded by the idle
	// watch, not by the request's deadlines, which the framework set on the
	// client's, nor by the upstream's write_timeout, which the http plugin
	// sets on each write to the upstream's.
	_ = c.rc.SetReadDeadline(time.Time{})
	_ = c.rc.SetWriteDeadline(time.Time{})
	if up := c.upConn.Load(); up != nil {
		handOver(up.Conn)
	}
	if c.handshake != nil {
		// Only now does the request become a tunnel: it leaves the
		// concurrency limit (StreamContext frees its slot) and lasts as
		// long as the client's connection.
		context.AfterFunc(framework.StreamContext(c.in), c.cancel)
	}
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
// that is not a stream to the client request's context (its deadline, its
// cancellation) until the upstream answers: the call's own context has no
// deadline, so that a tunnel can outlive the request. Marked by nothing
// else, the call is an ordinary one to the upstream's RoundTripper: timeout
// bounds it and the body of any answer but a 101, and Jfast-Timeout-Ms says
// the sooner of that and the request's deadline.
type handshakeTransport struct{ rt http.RoundTripper }

// RoundTrip also keeps, for every upgrade, the connection the request is
// sent on, which a tunnel takes over (handOver).
func (h handshakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := callOf(req.Context())
	if c == nil || !c.upgrade {
		return h.rt.RoundTrip(req)
	}
	var ctx context.Context = req.Context()
	if c.handshake != nil {
		// The call's values, the client request's deadline and cancellation.
		ctx = framework.ContextWithLife(ctx, c.handshake)
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { c.upConn.Store(&upstreamConn{info.Conn}) },
	})
	return h.rt.RoundTrip(req.WithContext(ctx))
}

// upstreamConn is the connection an upgrade was last sent on.
type upstreamConn struct{ net.Conn }

// handOver tells the owner of conn's deadlines (the http plugin's write gap)
// that the connection is past a protocol switch, through the connections
// that wrap it (a *tls.Conn).
func handOver(conn net.Conn) {
	for conn != nil {
		if s, ok := conn.(interface{ Switched() }); ok {
			s.Switched()
			return
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		conn = u.NetConn()
	}
}

// upgradeType is the protocol a response switches to, as the ReverseProxy
// reads it: its Upgrade header when Connection lists "upgrade", else "".
func upgradeType(h http.Header) string {
	for _, v := range h["Connection"] {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return h.Get("Upgrade")
			}
		}
	}
	return ""
}

// printable reports whether s is printable ASCII, as the ReverseProxy
// requires of a protocol it switches to.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
