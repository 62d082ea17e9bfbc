package storage

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// gapDialer dials S3 with connect_timeout and returns connections on which every
// read and write must make progress within gap (read_timeout). A deadline
// pushed forward by each I/O call bounds the gap between bytes rather than the
// transfer: a 50 MiB download at any steady speed is never cut, while a server
// that stops answering (SIGSTOP, a frozen VM, a full accept queue) is given up
// on after the gap.
type gapDialer struct {
	connect time.Duration
	gap     time.Duration
}

func (g gapDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: g.connect, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gapConn{Conn: c, gap: g.gap}, nil
}

// writeChunk bounds how much one write deadline covers, so a slow but moving
// upload renews its deadline at least every 16 KiB.
const writeChunk = 16 << 10

// gapConn moves its deadlines forward as bytes move. Setting a deadline on
// every call costs a timer update per read (on loopback a 50 MiB download is
// tens of thousands of reads, and measured 1.5–2× slower), so a deadline is
// set to now + gap×9/8 and renewed only once less than gap is left: the
// effective gap is between gap and gap×9/8, renewed at most every gap/8.
type gapConn struct {
	net.Conn
	gap     time.Duration
	readDL  atomic.Int64 // Unix nanoseconds of the read deadline set last
	writeDL int64        // the same for writes; only the writing goroutine uses it
	// lastIO is the stamp (see progress) of the latest read or write call's
	// start, and of each write's end: the last time this connection was not
	// waiting on S3. The time is the one the deadline code reads anyway.
	lastIO atomic.Int64
	// fired is set once a read or write deadline of the gap expired: S3 was
	// silent for the read gap. The transport then closes the connection, so
	// the request may fail with another error ("use of closed network
	// connection" from the writer when the reader's deadline fired first);
	// classify asks this instead of that error.
	fired atomic.Bool

	mu     sync.Mutex
	guards int // uploads in flight that want a reset on close (see s3Driver.putObject)
}

// guard makes a close of the connection send a TCP reset until unguard: an
// upload cut short must look failed to the server, not finished.
func (c *gapConn) guard() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.guards++; c.guards == 1 {
		c.setLinger(0)
	}
}

func (c *gapConn) unguard() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.guards--; c.guards == 0 {
		c.setLinger(-1) // back to the normal close for a pooled connection
	}
}

func (c *gapConn) setLinger(sec int) {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(sec)
	}
}

func (c *gapConn) Read(p []byte) (int, error) {
	now := time.Now()
	stamp(&c.lastIO, stampAt(now))
	if err := c.renewRead(now); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	c.noteTimeout(err)
	return n, err
}

// noteTimeout sets fired when err is a deadline of the gap expiring.
func (c *gapConn) noteTimeout(err error) {
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		c.fired.Store(true)
	}
}

func (c *gapConn) renewRead(now time.Time) error {
	if c.readDL.Load()-now.UnixNano() >= int64(c.gap) {
		return nil
	}
	dl := now.Add(c.gap + c.gap/8)
	c.readDL.Store(dl.UnixNano())
	return c.Conn.SetReadDeadline(dl)
}

// Write also renews the read deadline: while a request body is still going
// out, the transport's reader is waiting for a response the server does not
// owe yet. Its gap starts at the last byte sent.
func (c *gapConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		chunk := p[written:min(len(p), written+writeChunk)]
		now := time.Now()
		stamp(&c.lastIO, stampAt(now))
		if c.writeDL-now.UnixNano() < int64(c.gap) {
			dl := now.Add(c.gap + c.gap/8)
			c.writeDL = dl.UnixNano()
			if err := c.Conn.SetWriteDeadline(dl); err != nil {
				return written, err
			}
		}
		n, err := c.Conn.Write(chunk)
		c.noteTimeout(err)
		written += n
		if n > 0 {
			now := time.Now()
			stamp(&c.lastIO, stampAt(now))
			_ = c.renewRead(now)
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}
