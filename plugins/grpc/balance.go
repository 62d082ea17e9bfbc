package grpc

import (
	"encoding/json"
	"fmt"
	"slices"

	_ "google.golang.org/grpc/balancer/leastrequest" // registers least_request_experimental
	_ "google.golang.org/grpc/health"                // registers the client side of health_check

	"github.com/jfastframework/jfast/framework"
)

// The choices of balancing.
const (
	// BalanceRoundRobin is balancing = "round_robin": each call to the next
	// ready address.
	BalanceRoundRobin = "round_robin"
	// BalanceLeastRequest is balancing = "least_request": of two ready
	// addresses drawn at random, the one with fewer calls in flight.
	BalanceLeastRequest = "least_request"
	// BalancePickFirst is balancing = "pick_first": one address until its
	// connection fails, then the next (gRPC's own default).
	BalancePickFirst = "pick_first"
)

// balancingProblems reports the problems of the balancing keys.
func (u *Upstream) balancingProblems(l *framework.Problems) {
	choices := []string{BalanceRoundRobin, BalanceLeastRequest, BalancePickFirst}
	if !slices.Contains(choices, u.Balancing) {
		l.Error("balancing", fmt.Sprintf("must be %q, %q or %q, got %q", choices[0], choices[1], choices[2], u.Balancing),
			`set "round_robin" (the default), "least_request" or "pick_first"`)
	}
	if u.HealthCheck && u.Balancing == BalancePickFirst {
		l.Error("health_check", `cannot be used with balancing = "pick_first", which gRPC does not health-check`,
			`set balancing = "round_robin" or "least_request", or remove health_check`)
	}
	if u.HealthService != "" && !u.HealthCheck {
		l.Error("health_service", "is set while health_check is false", "set health_check = true, or remove health_service")
	}
}

// serviceConfig is the channel's default service config: its balancer and,
// with health_check, the service its health is watched for. (The plugin's
// retries are its own: grpc.WithDisableRetry is set on every channel.)
func serviceConfig(u Upstream) string {
	var policy map[string]any
	switch u.Balancing {
	case BalanceLeastRequest:
		policy = map[string]any{"least_request_experimental": map[string]any{"choiceCount": 2}}
	case BalancePickFirst:
		policy = map[string]any{"pick_first": map[string]any{}}
	default:
		policy = map[string]any{"round_robin": map[string]any{}}
	}
	sc := map[string]any{"loadBalancingConfig": []any{policy}}
	if u.HealthCheck {
		sc["healthCheckConfig"] = map[string]any{"serviceName": u.HealthService}
	}
	b, _ := json.Marshal(sc) // maps of strings and numbers: it cannot fail
	return string(b)
}
