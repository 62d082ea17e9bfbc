package grpc

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/framework"
)

// shedder admits unary RPCs through the App's front-door limiter
// ([app.overload], docs/overload.md), the one HTTP requests go through, so
// the process has one concurrency limit whichever protocol its callers
// speak. An RPC over the limit waits in the same queue and is then refused
// with RESOURCE_EXHAUSTED and a retry-after trailer, before its handler
// runs. grpc.health.v1 and reflection are never limited, and neither are
// streams: a stream's life is not a latency the limit can learn from.
type shedder struct {
	limiter *framework.Limiter // nil: app.overload.enabled = false
}

// shedMessage tells the caller the RPC did no work, so retrying it on
// another replica is safe.
const shedMessage = "the service is over its concurrency limit; the call was not started"

// unary sits inside server.unary (which gives the RPC its request ID and
// deadline, and logs and counts it), in front of the handler.
func (s shedder) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if s.limiter == nil || unlimited(info.FullMethod) {
		return handler(ctx, req)
	}
	permit, err := s.limiter.Acquire(ctx, framework.PriorityNormal)
	if err != nil {
		var shed *framework.ShedError
		if errors.As(err, &shed) && shed.Reason == framework.ShedClientGone {
			return nil, status.Error(codes.Canceled, "the caller went away while the call waited")
		}
		retry := time.Second
		if shed != nil {
			retry = shed.RetryAfter
		}
		_ = grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10)))
		return nil, status.Error(codes.ResourceExhausted, shedMessage)
	}
	defer func() { // deferred: a handler that panics gives its slot back too
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			permit.Abandon() // the caller left: its time says nothing of the service
		} else {
			permit.Release()
		}
	}()
	return handler(ctx, req)
}

// unlimited reports whether a method is one operators' tools call: health
// and reflection.
func unlimited(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") || strings.HasPrefix(method, "/grpc.reflection.")
}
