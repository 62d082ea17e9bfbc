package egress_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// dnsTable is a resolver answering from a table: a host's addresses, or an
// error. Nothing is resolved for real.
type dnsTable struct {
	mu      sync.Mutex
	answers map[string][]string
	err     error
	lookups int
}

func (d *dnsTable) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[host], d.err = addrs, nil
}

func (d *dnsTable) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *dnsTable) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lookups++
	if d.err != nil {
		return nil, d.err
	}
	var out []netip.Addr
	for _, a := range d.answers[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// discovered returns a set discovering url through table, with a test
// clock, and the table and clock.
func discovered(t *testing.T, url string, refuses func(netip.Addr) string) (*egress.Instances, *dnsTable, *resilience.TestClock) {
	t.Helper()
	table := &dnsTable{answers: map[string][]string{}}
	clock := resilience.NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := egress.NewInstances(egress.InstancesOpts{
		Name: "orders", Discover: url, Lookup: table.lookup, Refuses: refuses,
		Clock: clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, table, clock
}

func addrs(s *egress.Instances) []string {
	var out []string
	for _, in := range s.List() {
		out = append(out, in.Addr())
	}
	return out
}

// Every A and AAAA record is an instance at the URL's port, with the URL's
// scheme and path; the set is sorted and IPv4-mapped addresses are read as
// IPv4.
func TestResolveEveryRecordIsAnInstance(t *testing.T) {
	t.Parallel()
	s, table, _ := discovered(t, "http://orders-instances:8000/api", nil)
	if len(s.List()) != 0 || !s.Discovered() {
		t.Fatalf("instances before the first resolution: %v", addrs(s))
	}
	table.set("orders-instances", "10.1.0.9", "fd00::7", "::ffff:10.1.0.3")
	if err := s.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := addrs(s), []string{"10.1.0.3:8000", "10.1.0.9:8000", "[fd00::7]:8000"}; !slices.Equal(got, want) {
		t.Fatalf("instances %v, want %v", got, want)
	}
	if got := s.List()[2].Base().String(); got != "http://[fd00::7]:8000/api" {
		t.Fatalf("base URL %s", got)
	}
	st := s.State()
	if st.Discover != "orders-instances:8000" || st.Error != "" || st.Resolved.IsZero() || len(st.Instances) != 3 {
		t.Fatalf("state %+v", st)
	}

	// No port: the scheme's.
	s, table, _ = discovered(t, "https://billing.internal", nil)
	table.set("billing.internal", "10.2.0.1")
	if err := s.Resolve(context.Background()); err != nil || !slices.Equal(addrs(s), []string{"10.2.0.1:443"}) {
		t.Fatalf("instances %v (%v)", addrs(s), err)
	}
}

// An instance still resolved keeps its Instance, and so its outstanding
// attempts; one no longer resolved leaves the set.
func TestResolveKeepsInstancesThatStay(t *testing.T) {
	t.Parallel()
	s, table, _ := discovered(t, "http://orders-instances:8000", nil)
	table.set("orders-instances", "10.1.0.1", "10.1.0.2")
	if err := s.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	stays := s.List()[1]
	busy := s.Pick(nil, func(in *egress.Instance) bool { return in == stays })
	table.set("orders-instances", "10.1.0.2", "10.1.0.3")
	if err := s.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := addrs(s); !slices.Equal(got, []string{"10.1.0.2:8000", "10.1.0.3:8000"}) {
		t.Fatalf("instances %v", got)
	}
	if s.List()[0] != stays || stays.Outstanding() != 1 {
		t.Fatalf("10.1.0.2 became a new instance, or lost its outstanding attempt (%d)", s.List()[0].Outstanding())
	}
	busy.Done()
}

// A failed resolution, or one with no address, keeps the previous set and
// says why in the state; the next good one clears it.
func TestResolveFailureKeepsTheSet(t *testing.T) {
	t.Parallel()
	s, table, _ := discovered(t, "http://orders-instances:8000", nil)
	table.set("orders-instances", "10.1.0.1")
	if err := s.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := s.List()
	servfail := errors.New("server misbehaving")
	table.fail(servfail)
	if err := s.Resolve(context.Background()); !errors.Is(err, servfail) {
		t.Fatalf("err %v", err)
	}
	if !slices.Equal(s.List(), before) || !strings.Contains(s.State().Error, "server misbehaving") {
		t.Fatalf("after a failure: instances %v, state %+v", addrs(s), s.State())
	}
	table.set("orders-instances")
	if err := s.Resolve(context.Background()); err == nil || !slices.Equal(s.List(), before) {
		t.Fatalf("an empty answer emptied the set (%v) or was no error: %v", addrs(s), err)
	}
	table.set("orders-instances", "10.1.0.1")
	if err := s.Resolve(context.Background()); err != nil || s.State().Error != "" {
		t.Fatalf("a good resolution left %v / %q", err, s.State().Error)
	}
}

// A resolution that hangs is bounded by ResolveTimeout.
func TestResolveIsBounded(t *testing.T) {
	t.Parallel()
	s, err := egress.NewInstances(egress.InstancesOpts{
		Discover: "http://orders-instances:8000", ResolveTimeout: time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Lookup: func(ctx context.Context, _ string) ([]netip.Addr, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Resolve(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
}

// The guard is asked about every resolved address: a refused one is left
// out and named in the state; all refused keeps the previous set.
func TestResolveAppliesTheGuard(t *testing.T) {
	t.Parallel()
	guard := map[string]string{"169.254.169.254": "link-local", "127.0.0.1": "loopback"}
	refuses := func(ip netip.Addr) string { return guard[ip.String()] }
	s, table, _ := discovered(t, "http://orders-instances:8000", refuses)
	table.set("orders-instances", "10.1.0.1", "169.254.169.254", "::ffff:127.0.0.1")
	if err := s.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := addrs(s); !slices.Equal(got, []string{"10.1.0.1:8000"}) {
		t.Fatalf("instances %v", got)
	}
	if got := s.State().Refused; !slices.Equal(got, []string{"127.0.0.1 (loopback)", "169.254.169.254 (link-local)"}) {
		t.Fatalf("refused %v", got)
	}
	table.set("orders-instances", "169.254.169.254")
	err := s.Resolve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "every address is refused: 169.254.169.254 (link-local)") || !slices.Equal(addrs(s), []string{"10.1.0.1:8000"}) {
		t.Fatalf("all refused: %v, instances %v", err, addrs(s))
	}
}

// An IP address as the discovered host is one instance, with no lookup.
func TestResolveAnAddress(t *testing.T) {
	t.Parallel()
	s, table, _ := discovered(t, "http://10.9.0.1:8000", nil)
	if err := s.Resolve(context.Background()); err != nil || !slices.Equal(addrs(s), []string{"10.9.0.1:8000"}) || table.lookups != 0 {
		t.Fatalf("instances %v, %d lookups (%v)", addrs(s), table.lookups, err)
	}
}

// Start resolves at once, then every ResolveEvery of the set's clock;
// Stop ends it.
func TestResolveEveryInterval(t *testing.T) {
	t.Parallel()
	s, table, clock := discovered(t, "http://orders-instances:8000", nil)
	table.set("orders-instances", "10.1.0.1")
	s.Start()
	defer s.Stop()
	clock.BlockUntil(1) // resolved once, waiting for the next tick
	if got := addrs(s); !slices.Equal(got, []string{"10.1.0.1:8000"}) {
		t.Fatalf("after Start: %v", got)
	}
	table.set("orders-instances", "10.1.0.1", "10.1.0.2")
	clock.Advance(egress.DefaultResolveEvery - time.Nanosecond)
	if clock.Waiters() != 1 || len(s.List()) != 1 {
		t.Fatalf("resolved before the interval: %v", addrs(s))
	}
	clock.Advance(time.Nanosecond)
	clock.BlockUntil(1) // resolved again, waiting for the next tick
	if got := addrs(s); !slices.Equal(got, []string{"10.1.0.1:8000", "10.1.0.2:8000"}) {
		t.Fatalf("after the interval: %v", got)
	}
	s.Stop()
	if clock.Waiters() != 0 {
		t.Fatalf("a timer is left after Stop")
	}
}

// Stop cuts a resolution in progress (its lookup's context ends) rather than
// waiting out ResolveTimeout, an hour here.
func TestStopCutsAResolutionInProgress(t *testing.T) {
	t.Parallel()
	clock := resilience.NewTestClock(time.Unix(0, 0))
	var calls atomic.Int32
	waiting := make(chan struct{})
	s, err := egress.NewInstances(egress.InstancesOpts{
		Discover: "http://orders-instances:8000", ResolveTimeout: time.Hour, Clock: clock,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Lookup: func(ctx context.Context, _ string) ([]netip.Addr, error) {
			if calls.Add(1) == 1 {
				return []netip.Addr{netip.MustParseAddr("10.1.0.1")}, nil
			}
			close(waiting)
			<-ctx.Done() // the second resolution hangs until it is cut
			return nil, ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	clock.BlockUntil(1)
	clock.Advance(egress.DefaultResolveEvery)
	<-waiting
	s.Stop() // returns only once the lookup's context ended
	if got := addrs(s); !slices.Equal(got, []string{"10.1.0.1:8000"}) {
		t.Fatalf("instances after the cut resolution: %v, want the set kept", got)
	}
}

// A static set is its list, sorted; Resolve and Start leave it alone.
func TestStaticInstances(t *testing.T) {
	t.Parallel()
	s, err := egress.NewInstances(egress.InstancesOpts{Static: []string{"http://10.0.0.2:8000", "https://billing-1.internal/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	if err := s.Resolve(context.Background()); err != nil || s.Discovered() {
		t.Fatal(err)
	}
	if got := addrs(s); !slices.Equal(got, []string{"10.0.0.2:8000", "billing-1.internal"}) {
		t.Fatalf("instances %v", got)
	}
	if got := s.List()[1].Base().String(); got != "https://billing-1.internal/v1" {
		t.Fatalf("base %s", got)
	}
}

func TestNewInstancesRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		opts egress.InstancesOpts
		want string
	}{
		{egress.InstancesOpts{}, "either a static list or a name to discover"},
		{egress.InstancesOpts{Static: []string{"http://a:1"}, Discover: "http://b:1"}, "either a static list or a name to discover"},
		{egress.InstancesOpts{Static: []string{"http://a:1", "ftp://b"}}, "instance 2 must be an absolute http or https URL"},
		{egress.InstancesOpts{Static: []string{"http://a:1", "http://a:1/x"}}, "instance a:1 is listed twice"},
		{egress.InstancesOpts{Discover: "orders-instances:8000"}, "discovered URL has no scheme"},
	} {
		if _, err := egress.NewInstances(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.opts, err, tt.want)
		}
	}
}
