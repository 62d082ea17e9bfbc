package http

import "time"

// Switched ends the write gap (write_timeout) on a connection past a
// protocol switch: after a 101 the connection belongs to the caller (a
// proxy's WebSocket tunnel), which bounds it by its own rule, and a write
// blocked on a peer that stopped reading must not be cut write_timeout
// later. The read gap already ends with the call. A caller finds it by
// type assertion (interface{ Switched() }) on the connection httptrace's
// GotConn gives it, through NetConn for a *tls.Conn.
func (c *gapConn) Switched() {
	c.mu.Lock()
	c.switched = true
	_ = c.Conn.SetWriteDeadline(time.Time{})
	c.mu.Unlock()
}
