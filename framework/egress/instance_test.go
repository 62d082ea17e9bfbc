package egress_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// OnChange hears every resolution that changes the set, with the new list,
// before Resolve returns; one that changes nothing, or fails, is not heard.
func TestResolveOnChange(t *testing.T) {
	t.Parallel()
	table := &dnsTable{answers: map[string][]string{}}
	var heard [][]string
	s, err := egress.NewInstances(egress.InstancesOpts{
		Plugin: "grpc", Name: "inventory", Discover: "http://inventory:9000", Lookup: table.lookup,
		Clock: resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnChange: func(list []*egress.Instance) {
			var got []string
			for _, in := range list {
				got = append(got, in.Addr())
			}
			heard = append(heard, got)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	table.set("inventory", "10.3.0.2", "10.3.0.1")
	for range 2 { // the second finds the same addresses
		if err := s.Resolve(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	table.set("inventory", "10.3.0.2")
	if err := s.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	table.set("inventory")
	if err := s.Resolve(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "grpc: upstream 'inventory': resolve inventory: no addresses") {
		t.Fatalf("a resolution with no address: %v", err)
	}
	// The state's error leaves the plugin and the upstream to its reader
	// (/ready's entry of the upstream, a call's error, which name them).
	if got := s.State().Error; !strings.HasPrefix(got, "resolve inventory: no addresses") {
		t.Fatalf("State().Error = %q, want the resolution's failure without the upstream's name", got)
	}
	want := [][]string{{"10.3.0.1:9000", "10.3.0.2:9000"}, {"10.3.0.2:9000"}}
	if !slices.EqualFunc(heard, want, slices.Equal) {
		t.Fatalf("OnChange heard %v, want %v", heard, want)
	}
}

// An instance's breaker is made once, by the first caller; ResetBreaker
// forgets it only while it is still the instance's, and the next caller
// makes a fresh one. Health says whether and how the instance was checked.
func TestInstanceBreakerAndHealth(t *testing.T) {
	t.Parallel()
	_, l := staticSet(t, 1)
	in := l[0]
	made := 0
	newBreaker := func() *resilience.Breaker {
		made++
		return resilience.NewBreaker(resilience.BreakerOpts{Name: "orders " + in.Addr()})
	}
	if in.CurrentBreaker() != nil {
		t.Fatal("a breaker before the first attempt")
	}
	br := in.Breaker(newBreaker)
	if in.Breaker(newBreaker) != br || in.CurrentBreaker() != br || made != 1 {
		t.Fatalf("the breaker was made %d times", made)
	}
	if !in.ResetBreaker(br) || in.ResetBreaker(br) || in.CurrentBreaker() != nil {
		t.Fatal("ResetBreaker did not forget the breaker once")
	}
	if fresh := in.Breaker(newBreaker); fresh == br || made != 2 {
		t.Fatal("no fresh breaker after ResetBreaker")
	}

	if p, checked := in.Health(); checked || p != "" || !in.Healthy() {
		t.Fatalf("health before a check: %q %v", p, checked)
	}
	if old, checked := in.SetHealth("/ready answered 503"); checked || old != "" || in.Healthy() {
		t.Fatalf("first check: previous %q %v, healthy %v", old, checked, in.Healthy())
	}
	if old, checked := in.SetHealth(""); !checked || old != "/ready answered 503" || !in.Healthy() {
		t.Fatalf("second check: previous %q %v, healthy %v", old, checked, in.Healthy())
	}
}

// HostPort writes two listings of one server alike, and two servers apart.
func TestHostPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ host, port, want string }{
		{"10.0.0.7", "9000", "10.0.0.7:9000"},
		{"::ffff:10.0.0.7", "9000", "10.0.0.7:9000"}, // IPv4 written as IPv6: dials the IPv4 address
		{"0:0::1", "09000", "[::1]:9000"},
		{"::1", "9000", "[::1]:9000"},
		{"fe80::1%Eth0", "9000", "[fe80::1%Eth0]:9000"}, // a zone names an interface, whose name keeps its case
		{"Billing", "80", "billing:80"},
		{"billing.", "80", "billing.:80"},   // another name under a search list
		{"billing", "http", "billing:http"}, // not a number: refused elsewhere, compared as written
	} {
		if got := egress.HostPort(tc.host, tc.port); got != tc.want {
			t.Errorf("HostPort(%q, %q) = %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
}
