package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	ggrpc "google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/grpc"
)

// TestGreetServed calls Greet on the service's own gRPC server (setup makes it
// listen on a free port) with a plain grpc-go client.
func TestGreetServed(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	p, err := grpc.From(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ggrpc.NewClient(p.Addr(), ggrpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, greetMethod, wrapperspb.String("jfast"), reply); err != nil {
		t.Fatal(err)
	}
	if reply.GetValue() != "hello, jfast" {
		t.Fatalf("reply %q", reply.GetValue())
	}
}

// TestGreetCall points the `example` upstream at a gRPC server of the test's own
// and asks /grpc/greet, which calls it through the plugin's client.
func TestGreetCall(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := ggrpc.NewServer()
	upstream.RegisterService(&greeterDesc, greeter{})
	go func() { _ = upstream.Serve(ln) }()
	t.Cleanup(upstream.Stop)
	svc := setup(t, map[string]string{"JFAST_GRPC_UPSTREAMS__EXAMPLE__TARGET": ln.Addr().String()})
	if resp := svc.Get(t, "/grpc/greet"); resp.Status != http.StatusUnprocessableEntity {
		t.Fatalf("without a name: status %d: %s", resp.Status, resp)
	}
	resp := svc.Get(t, "/grpc/greet?name=jfast")
	if resp.Status != http.StatusOK || strings.TrimSpace(resp.String()) != `{"message":"hello, jfast"}` {
		t.Fatalf("status %d: %s", resp.Status, resp)
	}
}

// TestGreetCallDown points the `example` upstream at an address where nothing
// listens: /grpc/greet answers a 503 problem naming it.
func TestGreetCallDown(t *testing.T) {
	t.Parallel()
	addr := jfasttest.RefusedAddr(t) // connections refused until the test ends
	svc := setup(t, map[string]string{"JFAST_GRPC_UPSTREAMS__EXAMPLE__TARGET": addr})
	resp := svc.Get(t, "/grpc/greet?name=jfast")
	var p struct{ Dependency string }
	if resp.Status != http.StatusServiceUnavailable || json.Unmarshal(resp.Body, &p) != nil || p.Dependency != "example" {
		t.Fatalf("want a 503 naming example, got %d: %s", resp.Status, resp)
	}
}
