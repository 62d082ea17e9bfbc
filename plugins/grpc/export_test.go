package grpc

import (
	"context"

	"google.golang.org/grpc/connectivity"
)

// WaitForState waits until the client's channel (a single-target client's)
// is in state want, or ctx ends; it reports whether it got there. gRPC
// publishes a channel's state after it hands the balancer's new picker to
// the calls, so a call can go through a READY connection a moment before
// GetState says READY: a test that reads the state right after a call
// waits for the change instead.
func (c *ServiceClient) WaitForState(ctx context.Context, want connectivity.State) bool {
	for s := c.conn.GetState(); s != want; s = c.conn.GetState() {
		if !c.conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
	return true
}

// RetryFindsAnother is, for each instance in listed order, whether a retry
// after a hung attempt on it would find another instance (Verdict.Elsewhere).
func (c *ServiceClient) RetryFindsAnother() []bool {
	var out []bool
	for _, in := range c.instances() {
		out = append(out, c.another(in, nil))
	}
	return out
}
