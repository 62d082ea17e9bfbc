package egress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/internal/background"
)

// An upstream with several instances (the http plugin's instances and
// discover = true, the grpc plugin's discover = true) keeps them in an
// [Instances]: a static list, or the addresses a DNS name resolves to, again
// every ResolveEvery. The plugins call each instance with the one policy
// loop of the upstream, each instance with a breaker of its own.

// DefaultResolveEvery is how often a discovered upstream's name is resolved
// again. It matches the time-to-live CoreDNS gives a Kubernetes headless
// Service's records (5 s, its kubernetes plugin's default): resolving more
// often would only read its cache.
const DefaultResolveEvery = 5 * time.Second

// DefaultResolveTimeout bounds one resolution of a discovered upstream's
// name, like connect_timeout bounds a connect: a DNS server that hangs
// delays the next resolution, never a call.
const DefaultResolveTimeout = 2 * time.Second

// Instance is one replica of an upstream: the base URL its calls start from.
// Its address names it in /ready, logs and metrics and survives a
// re-resolution that still lists it, with its outstanding count.
type Instance struct {
	base        *url.URL
	addr        string
	outstanding atomic.Int64
	breaker     atomic.Pointer[resilience.Breaker] // the caller's, made at the first attempt
	health      atomic.Pointer[string]             // the last health check's problem ("" healthy); nil: none yet
}

// Healthy reports whether the instance's last health check, if any, passed.
func (i *Instance) Healthy() bool {
	p := i.health.Load()
	return p == nil || *p == ""
}

// Health returns the last health check's problem ("" when it passed), and
// whether the instance was checked at all.
func (i *Instance) Health() (problem string, checked bool) {
	if p := i.health.Load(); p != nil {
		return *p, true
	}
	return "", false
}

// SetHealth records a health check's problem ("" when it passed) and
// returns the previous one, as [Instance.Health] did.
func (i *Instance) SetHealth(problem string) (old string, checked bool) {
	if p := i.health.Swap(&problem); p != nil {
		return *p, true
	}
	return "", false
}

// Breaker returns the instance's breaker, made with newBreaker the first
// time (or the first time after [Instance.ResetBreaker]).
func (i *Instance) Breaker(newBreaker func() *resilience.Breaker) *resilience.Breaker {
	if br := i.breaker.Load(); br != nil {
		return br
	}
	br := newBreaker()
	if i.breaker.CompareAndSwap(nil, br) {
		return br
	}
	return i.breaker.Load()
}

// CurrentBreaker returns the instance's breaker, or nil before one was made.
func (i *Instance) CurrentBreaker() *resilience.Breaker { return i.breaker.Load() }

// ResetBreaker forgets br if it is still the instance's breaker, so the
// next [Instance.Breaker] makes a fresh (closed) one, and reports whether
// it did.
func (i *Instance) ResetBreaker(br *resilience.Breaker) bool {
	return br != nil && i.breaker.CompareAndSwap(br, nil)
}

// Base returns the instance's base URL: the upstream's, with the instance's
// host and port. The caller must not modify it.
func (i *Instance) Base() *url.URL { return i.base }

// Addr returns the instance's host and port ("10.0.0.7:8000").
func (i *Instance) Addr() string { return i.addr }

// Outstanding returns how many picks of the instance are not yet Done.
func (i *Instance) Outstanding() int64 { return i.outstanding.Load() }

// Done ends one pick of the instance: call it once per [Instances.Pick] that
// returned i, when the attempt it was picked for is over (its response body
// closed, or its error returned).
func (i *Instance) Done() { i.outstanding.Add(-1) }

// InstancesOpts configures [NewInstances]: either Static or Discover.
type InstancesOpts struct {
	// Plugin names the caller in errors ("http: upstream 'billing': ...").
	// Defaults to "egress".
	Plugin string
	// Name names the upstream in errors and logs. Defaults to "upstream".
	Name string
	// Static lists the instances' base URLs (absolute http or https URLs).
	Static []string
	// Discover is a base URL whose host is a DNS name resolved every
	// ResolveEvery: every A and AAAA record is an instance, at the URL's
	// port (or the scheme's).
	Discover string
	// ResolveEvery is the time between two resolutions of Discover.
	// Defaults to DefaultResolveEvery (5s).
	ResolveEvery time.Duration
	// ResolveTimeout bounds one resolution. Defaults to
	// DefaultResolveTimeout (2s).
	ResolveTimeout time.Duration
	// Lookup resolves a host name to its addresses. Defaults to
	// net.DefaultResolver's LookupNetIP for "ip" (A and AAAA).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Refuses, when set, is asked about every resolved address: a non-empty
	// answer (the reason, such as "private") leaves the address out of the
	// set. It is a client's address guard. Defaults to nil (none refused).
	Refuses func(netip.Addr) string
	// Clock times the resolutions. Defaults to the real clock.
	Clock resilience.Clock
	// Log receives a line when a resolution fails or changes the set.
	// Defaults to slog.Default().
	Log *slog.Logger
	// OnChange, when set, is called with the new list each time a
	// resolution changes a discovered set, before Resolve returns (and
	// before the next resolution starts). The grpc plugin keeps a channel
	// per instance with it. Defaults to nil.
	OnChange func([]*Instance)
}

// Instances is the set of instances of one upstream, and the choice of one
// for each attempt ([Instances.Pick]). A static set never changes; a
// discovered one changes when [Instances.Resolve] finds other addresses,
// which [Instances.Start] does every ResolveEvery. It is safe for concurrent
// use.
type Instances struct {
	opts     InstancesOpts
	template *url.URL // Discover, parsed
	port     string   // Discover's port

	current atomic.Pointer[[]*Instance] // sorted by address; never modified, replaced
	intN    func(int) int               // rand.IntN; a test's choice in tests

	mu       sync.Mutex // serialises resolutions; guards the fields below
	resolved time.Time  // last successful resolution
	lastErr  error      // of the last resolution, nil when it succeeded
	lastWhy  string     // lastErr without the plugin and upstream it names (State's Error)
	refused  []string   // addresses the last resolution left out, with why

	resolving background.Task // Start's resolutions
}

// NewInstances returns the instance set o describes. A static set holds its
// instances at once; a discovered one is empty until its first resolution
// ([Instances.Resolve], or [Instances.Start]). It returns an error for a URL
// that is not an absolute http or https URL, and unless exactly one of
// Static and Discover is given.
func NewInstances(o InstancesOpts) (*Instances, error) {
	o.Plugin = cmp.Or(o.Plugin, "egress")
	o.Name = cmp.Or(o.Name, "upstream")
	o.ResolveEvery = cmp.Or(o.ResolveEvery, DefaultResolveEvery)
	o.ResolveTimeout = cmp.Or(o.ResolveTimeout, DefaultResolveTimeout)
	if o.Lookup == nil {
		o.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if o.Clock == nil {
		o.Clock = resilience.RealClock()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	s := &Instances{opts: o, intN: rand.IntN}
	if (len(o.Static) == 0) == (o.Discover == "") {
		return nil, fmt.Errorf("%s: upstream '%s': instances need either a static list or a name to discover", o.Plugin, o.Name)
	}
	if o.Discover != "" {
		if problem := baseURLProblem(o.Discover); problem != "" {
			return nil, fmt.Errorf("%s: upstream '%s': the discovered URL %s", o.Plugin, o.Name, problem)
		}
		s.template, _ = url.Parse(o.Discover)
		s.port = cmp.Or(s.template.Port(), map[string]string{"http": "80", "https": "443"}[s.template.Scheme])
		s.current.Store(new([]*Instance))
		return s, nil
	}
	list := make([]*Instance, 0, len(o.Static))
	for n, raw := range o.Static {
		if problem := baseURLProblem(raw); problem != "" {
			return nil, fmt.Errorf("%s: upstream '%s': instance %d %s", o.Plugin, o.Name, n+1, problem)
		}
		u, _ := url.Parse(raw)
		list = append(list, &Instance{base: u, addr: u.Host})
	}
	slices.SortFunc(list, func(a, b *Instance) int { return strings.Compare(a.addr, b.addr) })
	for n := 1; n < len(list); n++ {
		if list[n].addr == list[n-1].addr {
			return nil, fmt.Errorf("%s: upstream '%s': instance %s is listed twice", o.Plugin, o.Name, list[n].addr)
		}
	}
	s.current.Store(&list)
	return s, nil
}

// List returns the current instances, sorted by address. The caller must not
// modify the slice.
func (s *Instances) List() []*Instance { return *s.current.Load() }

// Discovered reports whether the set is resolved from a name.
func (s *Instances) Discovered() bool { return s.template != nil }

// errNoAddresses is a resolution that succeeded with no address.
var errNoAddresses = errors.New("no addresses")

// Resolve resolves a discovered set's name now, within ResolveTimeout, and
// replaces the set with the addresses found, less those Refuses refuses. An
// instance still listed keeps its [Instance] (and its outstanding count). A
// failed resolution, or one that finds no usable address, keeps the previous
// set: a DNS server that falters must not empty an upstream whose instances
// still answer, and one that is really gone fails its calls anyway (its
// connections are refused). On a static set Resolve does nothing.
func (s *Instances) Resolve(ctx context.Context) error {
	if s.template == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	host := s.template.Hostname()
	var addrs []netip.Addr
	var err error
	if ip, perr := netip.ParseAddr(host); perr == nil {
		addrs = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, s.opts.ResolveTimeout)
		addrs, err = s.opts.Lookup(rctx, host)
		cancel()
	}
	var refused []string
	byAddr := map[string]netip.Addr{}
	for _, ip := range addrs {
		ip = ip.Unmap()
		if s.opts.Refuses != nil {
			if why := s.opts.Refuses(ip); why != "" {
				refused = append(refused, ip.String()+" ("+why+")")
				continue
			}
		}
		byAddr[net.JoinHostPort(ip.String(), s.port)] = ip
	}
	s.refused = slices.Compact(slices.Sorted(slices.Values(refused)))
	switch {
	case err != nil:
	case len(byAddr) == 0 && len(refused) > 0:
		err = fmt.Errorf("every address is refused: %s", strings.Join(s.refused, ", "))
	case len(byAddr) == 0:
		err = errNoAddresses
	}
	if err != nil {
		s.lastWhy = fmt.Sprintf("resolve %s: %v", host, err)
		s.lastErr = fmt.Errorf("%s: upstream '%s': resolve %s: %w", s.opts.Plugin, s.opts.Name, host, err)
		s.opts.Log.Warn("upstream instances not resolved; keeping the previous set",
			slog.String("upstream", s.opts.Name), slog.String("error", s.lastErr.Error()), slog.Int("instances", len(s.List())))
		return s.lastErr
	}
	s.lastErr = nil
	s.resolved = s.opts.Clock.Now()

	old := s.List()
	kept := make(map[string]*Instance, len(old))
	for _, in := range old {
		kept[in.addr] = in
	}
	next := make([]*Instance, 0, len(byAddr))
	for _, addr := range slices.Sorted(maps.Keys(byAddr)) {
		in := kept[addr]
		if in == nil {
			u := *s.template
			u.Host = addr
			in = &Instance{base: &u, addr: addr}
		}
		next = append(next, in)
	}
	if !slices.Equal(old, next) {
		s.current.Store(&next)
		if s.opts.OnChange != nil {
			s.opts.OnChange(next)
		}
		s.opts.Log.Info("upstream instances changed", slog.String("upstream", s.opts.Name),
			slog.Any("instances", addrsOf(next)), slog.Any("refused", s.refused))
	}
	return nil
}

func addrsOf(list []*Instance) []string {
	out := make([]string, len(list))
	for n, in := range list {
		out[n] = in.addr
	}
	return out
}

// Start resolves a discovered set's name at once, before it returns (within
// ResolveTimeout, so the first calls find the set), and then every
// ResolveEvery until Stop; a failed resolution is tried again at the next
// tick. On a static set it does nothing.
func (s *Instances) Start() {
	if s.template == nil {
		return
	}
	s.resolving.Every(s.opts.Clock, s.opts.ResolveEvery, func(ctx context.Context) { _ = s.Resolve(ctx) })
}

// Stop ends the resolutions Start began, cutting the one in progress, and
// waits for it to return.
func (s *Instances) Stop() { s.resolving.Stop() }

// InstancesState is what /ready and the status page show of a set.
type InstancesState struct {
	// Instances are the current instances' addresses, sorted.
	Instances []string `json:"instances"`
	// Discover is the name resolved, for a discovered set.
	Discover string `json:"discover,omitempty"`
	// Resolved is when the last resolution succeeded (zero before one did).
	Resolved time.Time `json:"resolved,omitzero"`
	// Error is the last resolution's failure ("resolve orders: …"; the
	// plugin and the upstream are its reader's to name), "" when it
	// succeeded.
	Error string `json:"error,omitempty"`
	// Refused are the addresses the last resolution left out, with why.
	Refused []string `json:"refused,omitempty"`
}

// State returns the set's current state.
func (s *Instances) State() InstancesState {
	st := InstancesState{Instances: addrsOf(s.List())}
	if s.template == nil {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Discover = net.JoinHostPort(s.template.Hostname(), s.port)
	st.Resolved = s.resolved
	if s.lastErr != nil {
		st.Error = s.lastWhy
	}
	st.Refused = slices.Clone(s.refused)
	return st
}

// baseURLProblem returns what is wrong with an instance's base URL, or "":
// an absolute http or https URL with a host and no credentials.
func baseURLProblem(s string) string {
	return framework.BaseURLProblem(s, "an Authorization header in headers")
}
