package grpc

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
)

// ClientOption configures [NewClient].
type ClientOption func(*clientOptions)

type clientOptions struct {
	framework.ClientOptions[*metricSet]
	pool   *Pool
	dial   []grpc.DialOption
	lookup func(context.Context, string) ([]netip.Addr, error)
}

// WithLookup sets how a discovered upstream's name (discover = true) is
// resolved to its instances' addresses: a resolver of the caller's own, or
// a table in a test. Defaults to the system's resolver (A and AAAA records).
func WithLookup(lookup func(ctx context.Context, host string) ([]netip.Addr, error)) ClientOption {
	return func(o *clientOptions) { o.lookup = lookup }
}

// WithClock sets the clock of the breaker, budget, bulkhead, backoff waits
// and of what a retry has left of timeout (a resilience.TestClock in tests).
// The deadline of the first attempt and of a stream is real time: gRPC
// sends it from the context. Defaults to the real clock.
func WithClock(c resilience.Clock) ClientOption { return func(o *clientOptions) { o.Clock = c } }

// WithMetrics registers the client's metrics (jfast_grpc_client_*, labelled
// with the upstream's name) in reg. Defaults to no registration: the client
// counts but nothing exports.
func WithMetrics(reg prometheus.Registerer) ClientOption {
	return func(o *clientOptions) { o.Registry = reg }
}

// WithLogger sets where breaker changes are logged. Defaults to no logging.
func WithLogger(l *slog.Logger) ClientOption { return func(o *clientOptions) { o.Logger = l } }

// WithPool takes the client's channel from p, shared with every other client
// of p whose channel settings are the same. p's owner closes it; the
// client's Close leaves it open. Defaults to a pool of the client's own,
// which its Close closes.
func WithPool(p *Pool) ClientOption { return func(o *clientOptions) { o.pool = p } }

// WithDialOptions adds gRPC dial options to the client's channel, such as
// interceptors or per-RPC credentials. They cannot be compared, so the client
// gets a channel of its own. Options that turn gRPC's retries back on or that
// replace the transport credentials defeat the plugin's rules: don't.
func WithDialOptions(opts ...grpc.DialOption) ClientOption {
	return func(o *clientOptions) { o.dial = append(o.dial, opts...) }
}

// withShared sets what the plugin's clients share: the App's clock and
// logger and the plugin's metric set.
func withShared(s framework.ClientOptions[*metricSet]) ClientOption {
	return func(o *clientOptions) { o.ClientOptions = s }
}
