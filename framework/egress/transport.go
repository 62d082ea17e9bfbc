package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"time"
)

// TransportOpts configures [NewTransport].
type TransportOpts struct {
	// ConnectTimeout bounds the dial (when Dial is nil) and, separately, the
	// TLS handshake.
	ConnectTimeout time.Duration
	// Dial replaces the dialer, such as a [Guard]'s; it must apply the
	// connect timeout itself. Defaults to a net.Dialer with ConnectTimeout
	// and 30 s keep-alives.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// WrapConn, when set, wraps every connection dialled (the http plugin's
	// read-gap deadlines).
	WrapConn func(net.Conn) net.Conn
	// Proxy is the one proxy every request goes through, when set. The
	// environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY are never read.
	// Defaults to none.
	Proxy *url.URL
	// TLS is the client TLS configuration. Defaults to Go's.
	TLS *tls.Config
	// MaxConnsPerHost bounds the connections per host; 0 is no bound.
	MaxConnsPerHost int
	// MaxIdleConns bounds the idle connections across hosts, and
	// MaxIdleConnsPerHost per host.
	MaxIdleConns, MaxIdleConnsPerHost int
	// HTTP2 lets the transport negotiate HTTP/2 over TLS. Defaults to false.
	HTTP2 bool
}

// idleConnTimeout closes a pooled connection unused for this long, as
// net/http's DefaultTransport does.
const idleConnTimeout = 90 * time.Second

// NewTransport returns an *http.Transport that follows jfast's connection
// rules (see the package doc): no proxy but [TransportOpts.Proxy], the dialer
// given (a [Guard]'s), and the TLS handshake bounded by the connect timeout.
func NewTransport(o TransportOpts) *http.Transport {
	dial := o.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	if o.WrapConn != nil {
		inner, wrap := dial, o.WrapConn
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := inner(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}
	}
	t := &http.Transport{
		// Never http.ProxyFromEnvironment: a proxy set in the environment
		// would receive every request with its token or API key.
		Proxy:                 nil,
		DialContext:           dial,
		TLSClientConfig:       o.TLS,
		TLSHandshakeTimeout:   o.ConnectTimeout,
		MaxConnsPerHost:       o.MaxConnsPerHost,
		MaxIdleConns:          o.MaxIdleConns,
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		IdleConnTimeout:       idleConnTimeout,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     o.HTTP2,
	}
	if o.Proxy != nil {
		t.Proxy = http.ProxyURL(o.Proxy)
	}
	return t
}
