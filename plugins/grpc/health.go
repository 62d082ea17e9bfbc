package grpc

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/readiness"
)

// healthWatchInterval is how often Health.Watch runs the readiness checks
// again to see whether the status changed. Every run runs every plugin's
// check, so it is not shorter than an orchestrator's usual probe period.
const healthWatchInterval = 5 * time.Second

// healthServer is grpc.health.v1.Health answered from the readiness checks
// behind /ready: ok and degraded are SERVING, unavailable (a critical plugin
// failed) NOT_SERVING. The overall status ("") and every registered service
// have the same status: the checks are the service's, not one gRPC
// service's.
type healthServer struct {
	healthpb.UnimplementedHealthServer
	app      *framework.App
	srv      *grpc.Server
	stopping chan struct{} // closed when the server shuts down: Watch streams end
	interval time.Duration
}

// known reports whether service is "" or a registered service.
func (h *healthServer) known(service string) bool {
	if service == "" {
		return true
	}
	_, ok := h.srv.GetServiceInfo()[service]
	return ok
}

// status runs the readiness checks.
func (h *healthServer) status(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	agg := h.app.Readiness()
	if agg == nil {
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	if agg.Run(ctx).Status == readiness.Unavailable {
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

// Check implements grpc.health.v1.Health.
func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if !h.known(req.GetService()) {
		return nil, status.Error(codes.NotFound, "unknown service")
	}
	return &healthpb.HealthCheckResponse{Status: h.status(ctx)}, nil
}

// List implements grpc.health.v1.Health: the overall status and every
// registered service's, which are the same.
func (h *healthServer) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st := h.status(ctx)
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{"": {Status: st}}}
	for name := range h.srv.GetServiceInfo() {
		out.Statuses[name] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch implements grpc.health.v1.Health: it sends the status, then again
// whenever it changes (checked every healthWatchInterval), until the caller
// leaves or the server shuts down. An unknown service is SERVICE_UNKNOWN, as
// the health protocol asks.
func (h *healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	ticker := time.NewTicker(h.interval)
	defer ticker.Stop()
	for {
		st := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
		if h.known(req.GetService()) {
			st = h.status(ctx)
		}
		if st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stopping:
			return status.Error(codes.Unavailable, "the server is shutting down")
		case <-ticker.C:
		}
	}
}
