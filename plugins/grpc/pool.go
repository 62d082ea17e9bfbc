package grpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // registers the "gzip" compressor
)

// Pool owns gRPC channels (*grpc.ClientConn) and hands the same one to every
// client whose channel settings are identical: target, transport security
// (insecure, ca_file, server_name, a TLS value), compression and dial
// options. A client never closes a channel; the pool's owner does, once, with
// [Pool.Close]. The plugin owns one pool and closes it when it stops, after
// the HTTP and gRPC servers have drained. A Pool is safe for concurrent use.
//
// A client's retries, breaker, budget, bulkhead, metadata and deadlines live
// in the client, above the channel, so they never make a channel of their
// own: an "audit" client that makes one attempt and an "orders" client that
// retries share the channel to their common target. Dial options given in Go
// ([WithDialOptions]) cannot be compared, so a client with any gets a
// channel of its own.
type Pool struct {
	base []grpc.DialOption // options every channel gets (telemetry)

	mu     sync.Mutex
	conns  map[channelKey]*grpc.ClientConn
	custom uint64 // last identity handed to a client with dial options of its own
	closed bool
}

// channelKey is what makes two channels different.
type channelKey struct {
	target      string
	insecure    bool
	caFile      string
	serverName  string
	compression string
	service     string // the default service config: balancing, health_check
	tls         *tls.Config
	custom      uint64 // non-zero: dial options of its own
}

// NewPool returns an empty pool whose channels all get opts (on top of the
// plugin's: retries disabled, transport credentials, compression).
func NewPool(opts ...grpc.DialOption) *Pool {
	return &Pool{base: opts, conns: map[channelKey]*grpc.ClientConn{}}
}

// Len returns how many channels the pool holds.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close closes every channel; RPCs in flight on them fail with CANCELLED.
// Afterwards the pool makes no channel. It is safe to call more than once.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for k, c := range p.conns {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(p.conns, k)
	}
	return errors.Join(errs...)
}

// errPoolClosed is the error of a channel asked of a closed pool.
var errPoolClosed = errors.New("grpc: the channel pool is closed")

// channel returns the channel for u's settings, making it on first use. No
// connection is made: gRPC connects on the first call, so an upstream that is
// down does not fail the boot.
// With own the channel is the caller's alone, never shared: a discovered
// instance's, closed with [Pool.drop] when its address is no longer listed.
func (p *Pool) channel(u Upstream, extra []grpc.DialOption, own bool) (*grpc.ClientConn, error) {
	key := channelKey{target: u.Target, insecure: u.Insecure, caFile: u.CAFile, serverName: u.ServerName, compression: u.Compression, service: serviceConfig(u), tls: u.TLS}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	if len(extra) > 0 || own {
		p.custom++
		key.custom = p.custom
	}
	if c, ok := p.conns[key]; ok {
		return c, nil
	}
	creds, err := transportCredentials(u)
	if err != nil {
		return nil, err
	}
	opts := make([]grpc.DialOption, 0, len(p.base)+len(extra)+4)
	opts = append(opts,
		// The plugin's retries are the only ones: gRPC's own (and any retry
		// policy a service config would bring) are off on every channel.
		// Transparent retries of a call that never left this process, or
		// that the server refused unprocessed, stay: they cannot duplicate.
		grpc.WithDisableRetry(),
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(reconnect),
		grpc.WithDefaultServiceConfig(key.service))
	if u.Compression != "" {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.UseCompressor(u.Compression)))
	}
	opts = append(opts, p.base...)
	opts = append(opts, extra...)
	c, err := grpc.NewClient(u.Target, opts...)
	if err != nil {
		return nil, fmt.Errorf("grpc: upstream '%s': %w", u.Name, err)
	}
	p.conns[key] = c
	return c, nil
}

// drop closes a channel the pool made with own and forgets it; RPCs in
// flight on it fail with CANCELLED.
func (p *Pool) drop(c *grpc.ClientConn) {
	p.mu.Lock()
	for k, v := range p.conns {
		if v == c {
			delete(p.conns, k)
		}
	}
	p.mu.Unlock()
	_ = c.Close() // already closed when the pool was
}

// reconnect is how a channel that lost its connection connects again: after
// 0.1 s, then 1.6 times longer each time (±20 %), at most 5 s apart. gRPC's
// own default grows to 120 s, and a channel waiting that long keeps failing
// calls for up to two minutes after its upstream came back. A connection
// attempt (TCP, TLS and the HTTP/2 handshake) may take 5 s (gRPC's default
// is 20 s): calls are bounded by their own timeout meanwhile.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// transportCredentials returns plain text for insecure = true, else TLS with
// the system's roots (or ca_file's) and server_name.
func transportCredentials(u Upstream) (credentials.TransportCredentials, error) {
	if u.Insecure {
		return insecure.NewCredentials(), nil
	}
	if u.TLS != nil {
		return credentials.NewTLS(u.TLS.Clone()), nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.ServerName}
	if u.CAFile != "" {
		pem, err := os.ReadFile(u.CAFile)
		if err != nil {
			return nil, fmt.Errorf("grpc: upstream '%s': ca_file: %w", u.Name, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("grpc: upstream '%s': ca_file holds no PEM certificate", u.Name)
		}
		conf.RootCAs = roots
	}
	return credentials.NewTLS(conf), nil
}
