package main

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	ggrpc "google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/problem"
)

// greetMethod is the gRPC method the service serves, and calls on the `example`
// upstream.
const greetMethod = "/example.v1.Greeter/Greet"

// greeterServer is the Greeter service's server API.
type greeterServer interface {
	Greet(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

// greeter serves Greeter.
type greeter struct{}

// Greet answers "hello, <name>".
func (greeter) Greet(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String("hello, " + in.GetValue()), nil
}

// greeterDesc is the Greeter service as protoc-gen-go-grpc writes it for
//
//	package example.v1;
//	service Greeter { rpc Greet(google.protobuf.StringValue) returns (google.protobuf.StringValue); }
//
// with the well-known StringValue as request and reply, so that the example needs
// no .proto file: a real service generates its own code and registers it the
// same way.
var greeterDesc = ggrpc.ServiceDesc{
	ServiceName: "example.v1.Greeter",
	HandlerType: (*greeterServer)(nil),
	Methods: []ggrpc.MethodDesc{{
		MethodName: "Greet",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor ggrpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(greeterServer).Greet(ctx, in)
			}
			info := &ggrpc.UnaryServerInfo{Server: srv, FullMethod: greetMethod}
			return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
				return srv.(greeterServer).Greet(ctx, req.(*wrapperspb.StringValue))
			})
		},
	}},
	Metadata: "example/v1/greeter.proto",
}

// grpcRoutes registers Greeter on the plugin's gRPC server ([plugin.grpc.server]
// listen) and mounts GET /grpc/greet?name=, which calls Greet on the `example`
// upstream through the plugin's client: one deadline over the attempts, retries
// for the idempotent methods, a breaker and a bulkhead.
func grpcRoutes(app *framework.App, r chi.Router) error {
	srv, err := grpc.Server(app)
	if err != nil {
		return err // [plugin.grpc.server] listen is not set
	}
	srv.RegisterService(&greeterDesc, greeter{})
	client, err := grpc.Client(app, "example")
	if err != nil {
		return err // no [plugin.grpc.upstreams.example]
	}
	r.Method(http.MethodGet, "/grpc/greet", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		name := r.URL.Query().Get("name")
		if name == "" {
			return problem.Unprocessable("the greeting needs a name", problem.FieldError{Field: "name", Detail: "must not be empty"})
		}
		reply := new(wrapperspb.StringValue)
		if err := client.Invoke(r.Context(), greetMethod, wrapperspb.String(name), reply); err != nil {
			return err // a *grpc.Error: a 503 naming "example" while it is down
		}
		return framework.JSON(w, http.StatusOK, map[string]string{"message": reply.GetValue()})
	}))
	return nil
}
