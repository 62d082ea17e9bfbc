// Package tcpproxy is a loopback TCP proxy for tests that can stop
// forwarding on command: the sockets stay open and nothing answers, which
// is how a paused server (SIGSTOP, docker pause) or a blackholed network
// looks to a client. It is the db plugin's tool for hang tests and
// measurements, and knows nothing about PostgreSQL.
package tcpproxy

import (
	"net"
	"sync"
)

// Proxy forwards every connection made to Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	gate   chan struct{} // closed while forwarding; open while paused
	conns  map[net.Conn]struct{}
	hung   map[net.Conn]bool // client sockets whose forwarding HangExisting stopped
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, gate: open, conns: map[net.Conn]struct{}{}, hung: map[net.Conn]bool{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pause stops forwarding. Connections stay open; bytes sent either way are
// held (not lost) until Resume; new connections are accepted and wait for
// Resume before the proxy connects them to the target.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default: // already paused
	}
}

// Resume forwards again, held bytes first.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// HangExisting stops forwarding on the connections open now, for good,
// while new connections are forwarded as usual: what a connection looks
// like after a NAT or firewall silently dropped it.
func (p *Proxy) HangExisting() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.hung[c] = true
	}
}

// wait blocks while the proxy is paused or conn hangs; false means the
// proxy was closed.
func (p *Proxy) wait(conn net.Conn) bool {
	p.mu.Lock()
	g := p.gate
	if p.hung[conn] {
		g = make(chan struct{}) // never closed
	}
	p.mu.Unlock()
	select {
	case <-g:
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	case <-p.done:
		return false
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.hung, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	defer p.untrack(client)
	if !p.wait(client) {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(client, server, client) }()
	go func() { defer wg.Done(); p.pipe(client, client, server) }()
	wg.Wait()
}

// pipe copies src to dst, holding each chunk while paused. When either side
// ends, both are closed so the other pipe ends too.
func (p *Proxy) pipe(client, dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait(client) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed socket: either way this pipe is done
		}
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}
