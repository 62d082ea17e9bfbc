package drills

import (
	"io"
	"net"
	"sync"
	"time"
)

// Fault is what a Proxy does to the traffic it carries.
type Fault int

const (
	// Pass forwards everything.
	Pass Fault = iota
	// Blackhole accepts connections and reads what clients send, but forwards
	// nothing and answers nothing: the socket is open and nothing responds, as
	// with a paused container or a frozen VM.
	Blackhole
	// Refuse stops listening and closes every connection: nothing is there.
	Refuse
	// Latency forwards everything after a delay per chunk.
	Latency
	// Reset resets every connection (RST) and each new one at once.
	Reset
	// Hold stops forwarding without losing anything: bytes sent either way
	// wait in the proxy and new connections are accepted but not connected to
	// the target until Pass, which delivers everything held — what a client
	// sees of a server paused with SIGSTOP or docker pause and then resumed.
	Hold
)

func (f Fault) String() string {
	switch f {
	case Pass:
		return "pass"
	case Blackhole:
		return "blackhole"
	case Refuse:
		return "refuse"
	case Latency:
		return "latency"
	case Reset:
		return "reset"
	case Hold:
		return "hold"
	}
	return "unknown"
}

// Proxy is a TCP fault proxy in front of one address. Point the dependency's
// client at Addr, then set faults while the service runs.
type Proxy struct {
	target string
	addr   string

	mu      sync.Mutex
	fault   Fault
	delay   time.Duration
	ln      net.Listener
	conns   map[*proxyConn]struct{}
	closed  bool
	done    chan struct{} // closed by Close
	gate    chan struct{} // open while holding, closed when the hold ends
	wg      sync.WaitGroup
	dialer  net.Dialer
	accepts int
}

type proxyConn struct {
	client, server net.Conn // server is nil for connections accepted while blackholed
	hung           bool     // set by HangExisting: never forwards again
	once           sync.Once
	closed         chan struct{}
}

func newProxyConn(client, server net.Conn) *proxyConn {
	return &proxyConn{client: client, server: server, closed: make(chan struct{})}
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, conns: map[*proxyConn]struct{}{}, done: make(chan struct{})}
	p.dialer.Timeout = 5 * time.Second
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr is the proxy's address ("127.0.0.1:PORT"); it stays the same across
// Refuse and Pass.
func (p *Proxy) Addr() string { return p.addr }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Fault returns the current fault.
func (p *Proxy) Fault() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault
}

// Accepted counts the connections accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepts
}

// Pass restores normal forwarding. Connections accepted while blackholed (which
// never reached the target) are closed; a stopped listener listens again on the
// same address.
func (p *Proxy) Pass() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(Pass, 0)
	for c := range p.conns {
		if c.server == nil {
			c.client.Close()
		}
	}
	return p.listenLocked()
}

// Hold stops forwarding and keeps what is sent: see [Hold].
func (p *Proxy) Hold() error { return p.set(Hold, 0) }

// HangExisting stops forwarding, for good, on the connections open now, while
// new connections are forwarded as usual: what a pooled connection looks like
// after a NAT or a firewall silently dropped it.
func (p *Proxy) HangExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.hung = true
	}
}

// Blackhole makes the proxy answer nothing: see [Blackhole].
func (p *Proxy) Blackhole() error { return p.set(Blackhole, 0) }

// Latency delays every forwarded chunk by d.
func (p *Proxy) Latency(d time.Duration) error { return p.set(Latency, d) }

// Reset resets every open connection and each new one.
func (p *Proxy) Reset() error {
	if err := p.set(Reset, 0); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		resetConn(c.client)
		if c.server != nil {
			resetConn(c.server)
		}
	}
	return nil
}

// Refuse stops listening and closes every connection: see [Refuse].
func (p *Proxy) Refuse() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(Refuse, 0)
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.close()
	}
	return nil
}

func (p *Proxy) set(f Fault, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLocked(f, d)
	return p.listenLocked()
}

// setLocked changes the fault, opening the gate of a hold that ends.
func (p *Proxy) setLocked(f Fault, d time.Duration) {
	if f == Hold && p.gate == nil {
		p.gate = make(chan struct{})
	}
	if f != Hold && p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.fault, p.delay = f, d
}

// wait blocks while c is held (the proxy holds, or c hangs) and returns the
// fault to apply; false means c or the proxy was closed meanwhile.
func (p *Proxy) wait(c *proxyConn) (Fault, time.Duration, bool) {
	for {
		p.mu.Lock()
		f, d, gate, hung := p.fault, p.delay, p.gate, c != nil && c.hung
		p.mu.Unlock()
		if f != Hold && !hung {
			return f, d, true
		}
		var closed chan struct{}
		if c != nil {
			closed = c.closed
		}
		if hung {
			gate = nil // never opens
		}
		select {
		case <-gate:
		case <-closed:
			return f, d, false
		case <-p.done:
			return f, d, false
		}
	}
}

func (p *Proxy) listenLocked() error {
	if p.ln != nil || p.closed {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepts++
		fault := p.fault
		p.mu.Unlock()
		switch fault {
		case Reset:
			resetConn(client)
			continue
		case Blackhole:
			p.track(newProxyConn(client, nil))
			continue
		}
		p.wg.Add(1)
		go p.connect(client)
	}
}

func (p *Proxy) connect(client net.Conn) {
	defer p.wg.Done()
	// Accepted while holding: connect only when the hold ends.
	switch f, _, ok := p.wait(nil); {
	case !ok:
		client.Close()
		return
	case f == Blackhole:
		p.track(newProxyConn(client, nil))
		return
	case f == Refuse || f == Reset:
		resetConn(client)
		return
	}
	server, err := p.dialer.Dial("tcp", p.target)
	if err != nil {
		// The target refused: so does the proxy.
		resetConn(client)
		return
	}
	p.track(newProxyConn(client, server))
}

func (p *Proxy) track(c *proxyConn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	p.conns[c] = struct{}{}
	if c.server == nil {
		p.wg.Add(1)
		p.mu.Unlock()
		go p.discard(c)
		return
	}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.pipe(c, c.server, c.client)
	go p.pipe(c, c.client, c.server)
}

// untrack forgets c and closes both sides; the other direction's copy then ends.
func (p *Proxy) untrack(c *proxyConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.close()
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.closed)
		if c.client != nil {
			c.client.Close()
		}
		if c.server != nil {
			c.server.Close()
		}
	})
}

// discard reads and drops what a blackholed client sends.
func (p *Proxy) discard(c *proxyConn) {
	defer p.wg.Done()
	defer p.untrack(c)
	io.Copy(io.Discard, c.client)
}

// pipe copies src to dst chunk by chunk, applying the fault in force when each
// chunk arrives.
func (p *Proxy) pipe(c *proxyConn, dst, src net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			fault, delay, ok := p.wait(c)
			if !ok {
				return
			}
			switch fault {
			case Blackhole:
				// Held: nothing is forwarded, nothing answers.
			case Latency:
				time.Sleep(delay)
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			case Pass:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			default:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
