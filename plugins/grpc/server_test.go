package grpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/problem"
	"github.com/jfastframework/jfast/readiness"
	"github.com/jfastframework/jfast/requestid"
)

// servedInventory is the shop.Inventory a jfast service serves in these
// tests: what it sees of each call is recorded, and some SKUs misbehave.
type servedInventory struct {
	shoppb.UnimplementedInventoryServer
	billing shoppb.InventoryClient // an upstream that is down

	mu        sync.Mutex
	ids       []string
	deadlines []time.Duration
	release   chan struct{} // "slow" waits for it
	started   chan struct{} // "slow" says it started
	hold      chan struct{} // "stubborn" and "stubborn-panic" wait for it, ignoring their context
	returned  chan struct{} // "stubborn" and "stubborn-panic" say they returned
}

func (s *servedInventory) GetStock(ctx context.Context, req *shoppb.GetStockRequest) (*shoppb.Stock, error) {
	s.mu.Lock()
	s.ids = append(s.ids, requestid.FromContext(ctx))
	if d, ok := ctx.Deadline(); ok {
		s.deadlines = append(s.deadlines, time.Until(d))
	}
	s.mu.Unlock()
	switch req.GetSku() {
	case "panic":
		panic("the shelf fell")
	case "redis-down":
		return nil, &problem.DependencyError{Dependency: "redis", Err: errors.New("dial tcp: connection refused")}
	case "upstream-down":
		_, err := s.billing.GetStock(ctx, req)
		return nil, err
	case "db-down":
		return nil, &problem.DependencyError{Dependency: "db", Detail: "the stock could not be read", Err: errors.New("dial tcp: connection refused")}
	case "bug":
		return nil, errors.New("index out of range in the secret algorithm")
	case "missing":
		return nil, status.Error(codes.NotFound, "no such sku")
	case "dependency-timeout":
		return nil, problem.New(http.StatusGatewayTimeout, "the warehouse did not answer in time")
	case "slow":
		close(s.started)
		<-s.release
	case "stubborn", "stubborn-panic":
		defer func() { s.returned <- struct{}{} }()
		<-s.hold
		if req.GetSku() == "stubborn-panic" {
			panic("the late shelf fell")
		}
	case "until-cut":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &shoppb.Stock{Sku: req.GetSku(), Available: 7}, nil
}

// switchPlugin is a plugin whose readiness check a test turns on and off:
// it stands for any critical dependency.
type switchPlugin struct{ down atomic.Bool }

func (p *switchPlugin) Name() string { return "switch" }
func (p *switchPlugin) Check(context.Context) readiness.Report {
	if p.down.Load() {
		return readiness.Unreachable("the critical dependency is down", nil)
	}
	return readiness.Passed("up", nil)
}

// grpcService starts a jfast service that serves inv over gRPC and returns
// it with a connection to its gRPC port.
func grpcService(t *testing.T, extra, serverExtra string, inv *servedInventory, plugins ...framework.Plugin) (*jfasttest.Service, *grpc.ClientConn) {
	t.Helper()
	p := jgrpc.New()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML: `
[app]
request_timeout = "2s"
shutdown_timeout = "5s"
[plugins]
enabled = ["observability", "grpc"` + enabledExtra(plugins) + `]
[plugin.grpc.server]
listen = "127.0.0.1:0"
` + serverExtra + `
[plugin.grpc.upstreams.billing]
target = "127.0.0.1:1"
insecure = true
attempts = 1
` + extra,
		Plugins: append([]framework.Plugin{p}, plugins...),
		Routes: func(app *framework.App, r chi.Router) error {
			srv, err := jgrpc.Server(app)
			if err != nil {
				return err
			}
			billing, err := jgrpc.Client(app, "billing")
			if err != nil {
				return err
			}
			inv.billing = shoppb.NewInventoryClient(billing)
			shoppb.RegisterInventoryServer(srv, inv)
			return nil
		},
	})
	conn, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return svc, conn
}

func enabledExtra(plugins []framework.Plugin) string {
	s := ""
	for _, p := range plugins {
		s += `, "` + p.Name() + `"`
	}
	return s
}

func TestServedCallsGetRequestIDAndDeadline(t *testing.T) {
	t.Parallel()
	inv := &servedInventory{}
	_, conn := grpcService(t, "", "", inv)
	stub := shoppb.NewInventoryClient(conn)
	var header metadata.MD
	ctx := metadata.AppendToOutgoingContext(ctxFor(t), "x-request-id", "order-7")
	if _, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "a"}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if got := header.Get("x-request-id"); len(got) != 1 || got[0] != "order-7" {
		t.Fatalf("x-request-id echoed = %v, want order-7", got)
	}
	// No ID, or one that is not sane: a fresh one. A caller's deadline
	// sooner than request_timeout (2s) wins; a later one does not.
	short, cancel := context.WithTimeout(ctxFor(t), 500*time.Millisecond)
	defer cancel()
	bad := metadata.AppendToOutgoingContext(short, "x-request-id", "two words")
	if _, err := stub.GetStock(bad, &shoppb.GetStockRequest{Sku: "a"}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	long, cancel2 := context.WithTimeout(ctxFor(t), 10*time.Second)
	defer cancel2()
	if _, err := stub.GetStock(long, &shoppb.GetStockRequest{Sku: "a"}); err != nil {
		t.Fatal(err)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.ids[0] != "order-7" || len(inv.ids[1]) != requestid.Len || inv.ids[1] != header.Get("x-request-id")[0] {
		t.Fatalf("request IDs = %v (echoed %v)", inv.ids, header.Get("x-request-id"))
	}
	if inv.deadlines[1] > 500*time.Millisecond || inv.deadlines[2] > 2*time.Second || inv.deadlines[2] < time.Second {
		t.Fatalf("deadlines = %v, want ≤ 500ms (the caller's), then ≤ 2s (request_timeout)", inv.deadlines)
	}
}

func TestServedErrorsBecomeStatuses(t *testing.T) {
	t.Parallel()
	inv := &servedInventory{}
	svc, conn := grpcService(t, "", "", inv)
	stub := shoppb.NewInventoryClient(conn)
	for _, tc := range []struct {
		sku     string
		code    codes.Code
		message string            // how the message begins
		info    map[string]string // the ErrorInfo's metadata, nil for none
	}{
		{"panic", codes.Internal, "internal error", nil},
		{"bug", codes.Internal, "internal error", nil},
		{"redis-down", codes.Unavailable, "redis is unavailable", map[string]string{"dependency": "redis"}},
		{"db-down", codes.Unavailable, "dependency 'db': the stock could not be read", map[string]string{"dependency": "db"}},
		{"upstream-down", codes.Unavailable, "upstream 'billing'", map[string]string{"dependency": "billing", "upstream": "billing"}},
		{"missing", codes.NotFound, "no such sku", nil},
	} {
		_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: tc.sku})
		st := status.Convert(err)
		if st.Code() != tc.code || !strings.HasPrefix(st.Message(), tc.message) {
			t.Errorf("%s: %s %q, want %s beginning %q", tc.sku, st.Code(), st.Message(), tc.code, tc.message)
		}
		var info map[string]string
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == "jfast" {
				info = ei.GetMetadata()
			}
		}
		if !maps.Equal(info, tc.info) {
			t.Errorf("%s: ErrorInfo metadata %v, want %v", tc.sku, info, tc.info)
		}
		if strings.Contains(st.Message(), "secret algorithm") || strings.Contains(st.Message(), "shelf") || strings.Contains(st.Message(), "connection refused") || strings.Contains(st.Message(), "dial tcp") {
			t.Errorf("%s: internals reached the caller: %q", tc.sku, st.Message())
		}
	}
	logs := svc.Logs()
	for _, want := range []string{"panic serving rpc", "the shelf fell", "goroutine", "secret algorithm", `msg=rpc`, `method=/shop.Inventory/GetStock code=NOT_FOUND`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
	metrics := svc.Get(t, "/metrics").String()
	if !strings.Contains(metrics, `jfast_grpc_server_handled_total{code="INTERNAL",method="/shop.Inventory/GetStock"} 2`) {
		t.Errorf("/metrics lacks the served calls:\n%s", grepLines(metrics, "jfast_grpc_server"))
	}
}

// TestCallCutByItsDeadline: a served call that runs past the caller's
// grpc-timeout is DEADLINE_EXCEEDED in the access log and in
// jfast_grpc_server_handled_total, although what ends it on the server is
// often the caller's RST_STREAM (a cancel) arriving just before the
// server's own timer.
func TestCallCutByItsDeadline(t *testing.T) {
	t.Parallel()
	svc, conn := grpcService(t, "", "", &servedInventory{})
	stub := shoppb.NewInventoryClient(conn)
	// 800 ms: the server's timer may start late by as much as a busy
	// machine delays reading the call, and a cancel within a quarter of the
	// timeout (200 ms) of the deadline is the deadline's.
	const calls = 6
	for range calls {
		ctx, cancel := context.WithTimeout(ctxFor(t), 800*time.Millisecond)
		_, err := stub.GetStock(ctx, &shoppb.GetStockRequest{Sku: "until-cut"})
		cancel()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("the caller got %v, want DEADLINE_EXCEEDED", err)
		}
	}
	// The caller stops waiting before the server ends the call: wait for
	// the server's access log lines.
	if err := svc.WaitLogs(ctxFor(t), func(logs string) bool {
		return strings.Count(logs, "method=/shop.Inventory/GetStock code=") >= calls
	}); err != nil {
		t.Fatalf("the access log has fewer than %d lines:\n%s", calls, svc.Logs())
	}
	if n := strings.Count(svc.Logs(), "method=/shop.Inventory/GetStock code=DEADLINE_EXCEEDED"); n != calls {
		t.Errorf("the access log has %d DEADLINE_EXCEEDED lines of %d:\n%s", n, calls, grepLines(svc.Logs(), "msg=rpc"))
	}
	want := fmt.Sprintf(`jfast_grpc_server_handled_total{code="DEADLINE_EXCEEDED",method="/shop.Inventory/GetStock"} %d`, calls)
	if metrics := svc.Get(t, "/metrics").String(); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "jfast_grpc_server_handled"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestHealthFollowsReady: grpc.health.v1 answers from /ready's checks:
// SERVING while /ready is ok or degraded, NOT_SERVING while it is
// unavailable.
func TestHealthFollowsReady(t *testing.T) {
	t.Parallel()
	sw := &switchPlugin{}
	svc, conn := grpcService(t, "[plugin.switch]\ncritical = true\n", "", &servedInventory{}, sw)
	health := healthpb.NewHealthClient(conn)
	check := func(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
		resp, err := health.Check(ctxFor(t), &healthpb.HealthCheckRequest{Service: service})
		return resp.GetStatus(), err
	}
	for _, service := range []string{"", "shop.Inventory"} {
		if st, err := check(service); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %s, %v, want SERVING", service, st, err)
		}
	}
	sw.down.Store(true)
	if resp := svc.Get(t, "/ready"); resp.Status != http.StatusServiceUnavailable {
		t.Fatalf("/ready = %d", resp.Status)
	}
	if st, err := check(""); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check = %s, %v with /ready unavailable, want NOT_SERVING", st, err)
	}
	if _, err := check("shop.Billing"); status.Code(err) != codes.NotFound {
		t.Fatalf("Check(unknown service) err = %v, want NOT_FOUND", err)
	}
	list, err := health.List(ctxFor(t), &healthpb.HealthListRequest{})
	if err != nil || list.GetStatuses()["shop.Inventory"].GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("List = %v, %v", list, err)
	}
	sw.down.Store(false)
	watch, err := health.Watch(ctxFor(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch = %v, %v, want SERVING", resp, err)
	}
}

func TestReflectionIsOffUnlessAsked(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		_, conn := grpcService(t, "", fmt.Sprintf("reflection = %v", on), &servedInventory{})
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctxFor(t))
		if err == nil {
			err = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		}
		var resp *reflectionpb.ServerReflectionResponse
		if err == nil || errors.Is(err, io.EOF) { // io.EOF: the status waits in Recv
			resp, err = stream.Recv()
		}
		if !on && status.Code(err) != codes.Unimplemented {
			t.Fatalf("reflection off: err = %v, want UNIMPLEMENTED", err)
		}
		if on && (err != nil || !strings.Contains(resp.String(), "shop.Inventory")) {
			t.Fatalf("reflection on: %v, %v", resp, err)
		}
	}
}

// TestStopDrainsCallsInFlight: stopping the service lets a call in flight
// finish (GracefulStop) and refuses new ones.
func TestStopDrainsCallsInFlight(t *testing.T) {
	t.Parallel()
	inv := &servedInventory{release: make(chan struct{}), started: make(chan struct{})}
	svc, conn := grpcService(t, "", "", inv)
	stub := shoppb.NewInventoryClient(conn)
	done := make(chan error, 1)
	go func() {
		_, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "slow"})
		done <- err
	}()
	<-inv.started
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a call was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(inv.release)
	if err := <-done; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if _, err := stub.GetStock(ctxFor(t), &shoppb.GetStockRequest{Sku: "a"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("a call after stop: %v, want UNAVAILABLE", err)
	}
}

// serverApp returns an App of the grpc plugin alone, configured by toml,
// whose routes take its server, not yet started.
func serverApp(t *testing.T, toml string) *framework.App {
	t.Helper()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"grpc\"]\n" + toml,
		Plugins: []framework.Plugin{jgrpc.New()},
		Routes: func(app *framework.App, r chi.Router) error {
			_, err := jgrpc.Server(app)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func TestServerWithoutListenFailsTheBoot(t *testing.T) {
	t.Parallel()
	app := serverApp(t, "")
	if err := app.Start(ctxFor(t)); err == nil || !strings.Contains(err.Error(), "listen is not set") {
		t.Fatalf("err = %v", err)
	}
}

// TestServerPortInUse: a gRPC listen address whose port is taken fails the
// boot naming the key, who holds the port (here the test itself) and a port
// to give through the environment.
func TestServerPortInUse(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	app := serverApp(t, "[plugin.grpc.server]\nlisten = \""+held.Addr().String()+"\"\n")
	err = app.Start(ctxFor(t))
	if err == nil {
		_ = app.Stop(ctxFor(t))
		t.Fatal("the gRPC server started on a port in use")
	}
	for _, want := range []string{
		"listen on " + held.Addr().String() + " (plugin.grpc.server.listen)",
		"(by this process: another of its listeners has port",
		"JFAST_GRPC_SERVER__LISTEN=127.0.0.1:",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
