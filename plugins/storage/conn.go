package storage

import (
	"context"
	"net"
	"time"
)

// gapDialer dials S3 with connect_timeout and returns connections on which every
// read and write must make progress within gap (read_timeout). A deadline per
// I/O call, pushed forward by each one, bounds the gap between bytes rather
// than the transfer: a 50 MiB download at any steady speed is never cut, a
// server that stops answering (SIGSTOP, a frozen VM, a full accept queue) is
// given up on after gap.
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

// writeChunk bounds how much one deadline covers on the way out, so a slow
// but moving upload renews its deadline at least every 16 KiB.
const writeChunk = 16 << 10

type gapConn struct {
	net.Conn
	gap time.Duration
}

func (c *gapConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.gap)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Write also pushes the read deadline forward: while a request body is still
// going out, the transport's reader is waiting for the response, and the
// server owes none yet. Its gap starts at the last byte sent.
func (c *gapConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		chunk := p[written:min(len(p), written+writeChunk)]
		now := time.Now()
		if err := c.Conn.SetWriteDeadline(now.Add(c.gap)); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(chunk)
		written += n
		if n > 0 {
			_ = c.Conn.SetReadDeadline(time.Now().Add(c.gap))
		}
		if err != nil {
			return written, err
		}
	}
	return written, nil
}
