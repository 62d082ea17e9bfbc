package grpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// An upstream with instances (instances = ["host:port", ...]) has a channel
// per instance, from the pool, and a breaker per instance. Each attempt of a
// call picks an instance in the client (ServiceClient.pick), takes a ticket
// of that instance's breaker and gives it the attempt's outcome when the
// policy's loop reports it; the call is admitted without the upstream's
// breaker (resilience.RunOpts.NoBreaker), so the upstream is refused only
// when every instance's breaker is open. This is the http plugin's design
// for its instances: the choice happens where the breakers, the retries and
// the "retry elsewhere" rule already are, rather than in a gRPC balancer
// that would have to learn each of them.

// instance is one replica of an upstream with instances.
type instance struct {
	addr        string
	conn        *grpc.ClientConn
	breaker     atomic.Pointer[resilience.Breaker] // named "<upstream> <addr>"
	lost        atomic.Bool                        // its channel was seen in TRANSIENT_FAILURE since it was last READY
	outstanding atomic.Int64                       // attempts picked and not yet reported
	newBreaker  func() *resilience.Breaker
}

// maxPickBuffer is how many instances a pick considers without allocating.
const maxPickBuffer = 16

// instanceProblems reports the problems of the instances key.
func (u *Upstream) instanceProblems(l *framework.Problems) {
	if u.Target != "" {
		l.Error("instances", "cannot be set together with target",
			`keep target (one address, or a "dns:///" name resolved to every instance) or instances (a fixed list of "host:port"), not both`)
	}
	if u.Discover {
		l.Error("discover", "cannot be set together with instances",
			`keep instances (a fixed list of "host:port") or discover = true (target's name resolved again and again), not both`)
	}
	seen := map[string]int{} // an address, as egress.HostPort writes it → the first instances[i] listing it
	for n, addr := range u.Instances {
		problem := ""
		host, port, err := net.SplitHostPort(addr)
		key, portProblem := egress.HostPort(host, port), framework.PortProblem(port)
		first, listed := seen[key]
		switch {
		case err != nil || host == "" || port == "" || strings.Contains(addr, "/"):
			problem = fmt.Sprintf("%q is not \"host:port\"", addr)
		case portProblem != "":
			problem = fmt.Sprintf("%q %s", addr, portProblem)
		case listed:
			problem = fmt.Sprintf("is the address of instances[%d] again, %q (a host name ignores case): each instance is listed once", first, u.Instances[first])
		default:
			seen[key] = n
		}
		if problem != "" {
			l.Error(fmt.Sprintf("instances[%d]", n), problem,
				`list addresses such as "10.0.0.7:9000", in the file or comma-separated in JFAST_GRPC_UPSTREAMS__<NAME>__INSTANCES`)
		}
	}
}

// newInstances makes the client's instances: a channel from the pool for
// each address, and its breaker.
func (c *ServiceClient) newInstances(addrs []string) error {
	c.metrics.instances = c.metrics.dep.InstanceBreakers(c.instanceBreakers)
	list := make([]*instance, 0, len(addrs))
	for _, addr := range addrs {
		in, err := c.newInstance(addr, false)
		if err != nil {
			return err
		}
		list = append(list, in)
	}
	c.insts.Store(&list)
	c.metrics.instances.Refresh()
	return nil
}

// instanceBreakers returns the breaker of every current instance, for the
// breaker metrics (framework.InstanceBreakers).
func (c *ServiceClient) instanceBreakers() []*resilience.Breaker {
	list := c.instances()
	out := make([]*resilience.Breaker, len(list))
	for i, in := range list {
		out[i] = in.breaker.Load()
	}
	return out
}

// newInstance makes the instance at addr: its channel (the client's own
// with own) and its breaker, named "<upstream> <addr>", whose transitions
// are the upstream's in the breaker metrics.
func (c *ServiceClient) newInstance(addr string, own bool) (*instance, error) {
	u := c.up
	one := u
	one.Target, one.Instances = addr, nil
	if own && !u.Insecure && u.TLS == nil && u.ServerName == "" {
		// A discovered instance's certificate names the service, not the
		// address dialled.
		one.ServerName, _, _ = net.SplitHostPort(discoverAddr(u.Target))
	}
	conn, err := c.pool.channel(one, c.dial, own)
	if err != nil {
		return nil, err
	}
	name := u.Name + " " + addr
	logger := c.logger.With("upstream", u.Name)
	in := &instance{addr: addr, conn: conn, newBreaker: func() *resilience.Breaker {
		var br *resilience.Breaker
		feed := func(ch resilience.StateChange) { c.metrics.instances.Transition(br, ch) }
		br = resilience.NewBreaker(u.BreakerConfig.Opts(name, c.clock, resilience.LogStateChanges(logger, "grpc", u.BreakerCoolDown, feed)))
		return br
	}}
	in.breaker.Store(in.newBreaker())
	c.watchers.Add(1)
	go c.watchInstance(in)
	return in, nil
}

// watchInstance follows in's channel until it shuts down or the client
// closes, so that an instance whose replica came back is taken back when it
// connects, not when a call next picks it: /ready, the status page and the
// breaker gauge say so at once, and the log line has the time it connected.
// It only notes a lost connection (no call's evidence: connected gives the
// breaker that).
func (c *ServiceClient) watchInstance(in *instance) {
	defer c.watchers.Done()
	for s := in.conn.GetState(); s != connectivity.Shutdown; s = in.conn.GetState() {
		switch s {
		case connectivity.TransientFailure:
			in.lost.Store(true)
		case connectivity.Ready:
			c.reconnected(in)
		}
		if !in.conn.WaitForStateChange(c.watch, s) {
			return
		}
	}
}

// endWatch stops the instances' watchers and waits for them.
func (c *ServiceClient) endWatch() {
	c.stopWatch()
	c.watchers.Wait()
}

// instances returns the current instances; nil with a target.
func (c *ServiceClient) instances() []*instance {
	if p := c.insts.Load(); p != nil {
		return *p
	}
	return nil
}

// discoverAddr returns the "host:port" a discovered target names: the
// target without its "dns:///".
func discoverAddr(target string) string {
	return strings.TrimPrefix(target, "dns:///")
}

// discoverProblems reports the problems of discover = true.
func (u *Upstream) discoverProblems(l *framework.Problems) {
	fix := `set target to "dns:///<name>:<port>" (a Kubernetes headless Service's name), or remove discover`
	if u.Target == "" {
		l.Error("target", "is missing: discover = true resolves its name", fix)
		return
	}
	if strings.Contains(discoverAddr(u.Target), "/") || strings.HasPrefix(u.Target, "unix:") {
		l.Error("discover", fmt.Sprintf("needs a DNS name and port as target, not %q", u.Target), fix)
		return
	}
	host, port, err := net.SplitHostPort(discoverAddr(u.Target))
	if err != nil || host == "" || port == "" {
		l.Error("target", fmt.Sprintf("%q is not \"dns:///host:port\"", u.Target), fix)
	} else if problem := framework.PortProblem(port); problem != "" {
		l.Error("target", problem, fix)
	}
}

// discover starts resolving the target's name, at once (the first
// resolution is over before it returns) and every resolve_every, with the
// instance set of framework/egress: each address resolved is an instance with a
// channel of its own (c.discovered).
func (c *ServiceClient) discover(lookup func(context.Context, string) ([]netip.Addr, error)) error {
	empty := []*instance{}
	c.insts.Store(&empty)
	c.metrics.instances = c.metrics.dep.InstanceBreakers(c.instanceBreakers)
	found, err := egress.NewInstances(egress.InstancesOpts{
		Plugin: "grpc", Name: c.up.Name, Discover: "http://" + discoverAddr(c.up.Target), ResolveEvery: c.up.ResolveEvery,
		Lookup: lookup, Clock: c.clock, Log: c.logger.With("plugin", "grpc"), OnChange: c.discovered,
	})
	if err != nil {
		return err
	}
	c.found = found
	found.Start()
	return nil
}

// discovered makes the instance set follow a resolution: an address still
// listed keeps its instance (channel, breaker, outstanding attempts), a new
// one gets a channel and a breaker, and the channel of one no longer listed
// is closed (its calls in flight fail with CANCELLED). Resolutions are
// serialised, so two never race here.
func (c *ServiceClient) discovered(list []*egress.Instance) {
	old := map[string]*instance{}
	for _, in := range c.instances() {
		old[in.addr] = in
	}
	next := make([]*instance, 0, len(list))
	for _, f := range list {
		if in := old[f.Addr()]; in != nil {
			delete(old, f.Addr())
			next = append(next, in)
			continue
		}
		in, err := c.newInstance(f.Addr(), true)
		if err != nil {
			c.logger.Warn("upstream instance left out: no channel", slog.String("upstream", c.up.Name),
				slog.String("instance", f.Addr()), slog.String("error", err.Error()))
			continue
		}
		next = append(next, in)
	}
	c.insts.Store(&next)
	c.metrics.instances.Refresh()
	for _, in := range old {
		c.pool.drop(in.conn)
	}
}

// stopDiscovery ends the resolutions of discover = true.
func (c *ServiceClient) stopDiscovery() {
	if c.found != nil {
		c.found.Stop()
	}
}

// noInstance is the error of an attempt with no instance at all: a
// discovered name not resolved yet, or whose resolutions failed.
func (c *ServiceClient) noInstance() error {
	if c.found != nil {
		if st := c.found.State(); st.Error != "" {
			return &noInstanceError{fmt.Errorf("no instance to call: %s", st.Error)}
		}
		return &noInstanceError{fmt.Errorf("no instance to call: %s resolved to none yet", discoverAddr(c.up.Target))}
	}
	return &noInstanceError{errors.New("no instance to call")}
}

// connected reports whether in's channel may take a call without waiting
// for a connection: READY, or IDLE (never used, or idle for long, it
// connects on the call). A channel in TRANSIENT_FAILURE (its connections
// refused or lost) is the evidence a call would meet: without health_check
// its breaker is told so, at no call's cost; with health_check the state
// may only mean NOT_SERVING, which is no failure of the calls.
//
// An instance whose channel is READY again after a TRANSIENT_FAILURE (a
// restarted replica) gets a fresh breaker if its own is not closed: it
// connects again, and keeping it out for the rest of a cool-down would
// eject every replica of a rolling restart faster than breaker_cool_down.
// An instance that connects but fails its calls never loses its
// connection, so its breaker stays open.
func (c *ServiceClient) connected(in *instance) bool {
	switch in.conn.GetState() {
	case connectivity.Ready:
		c.reconnected(in)
		return true
	case connectivity.Idle:
		return true
	case connectivity.TransientFailure:
		in.lost.Store(true)
		if !c.up.HealthCheck {
			if t, err := in.breaker.Load().Allow(); err == nil {
				t.Done(resilience.Failure)
			}
		}
	}
	return false
}

// pick chooses the instance of one attempt and takes a ticket of its
// breaker; the instance is outstanding until the attempt is reported
// ([instance.outstanding]). Connected instances first (READY or IDLE);
// when none is, any instance (its call meets the connection's error, or
// waits for the connection being made). Instances tried by the call's
// earlier attempts are chosen again only when no other is left, so a retry
// goes elsewhere whenever it can. An instance whose breaker refuses is
// skipped; when every one refuses the error is the soonest-ending
// *resilience.OpenError.
func (c *ServiceClient) pick(tried []*instance) (*instance, resilience.Ticket, error) {
	var refusedBuf [maxPickBuffer]*instance
	refused := refusedBuf[:0]
	var open *resilience.OpenError
	anyState := false
	for {
		in := c.choose(tried, refused, anyState)
		if in == nil {
			if !anyState {
				anyState = true
				continue
			}
			break
		}
		t, err := in.breaker.Load().Allow()
		if err == nil {
			in.outstanding.Add(1)
			return in, t, nil
		}
		refused = append(refused, in)
		var oe *resilience.OpenError
		if errors.As(err, &oe) && (open == nil || oe.RetryAfter() < open.RetryAfter()) {
			open = oe
		}
	}
	if open == nil {
		// No instance at all (a discovered name not resolved yet): with
		// one, every instance is a candidate of the last round.
		return nil, resilience.Ticket{}, c.noInstance()
	}
	return nil, resilience.Ticket{}, open
}

// choose returns the instance balancing chooses among the candidates (not
// refused; connected unless anyState; untried when any is), or nil.
// another reports whether a retry after an attempt on cur would find
// another instance: one neither cur nor tried whose breaker is not open
// (resilience.Verdict.Elsewhere).
func (c *ServiceClient) another(cur *instance, tried []*instance) bool {
	for _, in := range c.instances() {
		if in != cur && !slices.Contains(tried, in) && in.breaker.Load().Snapshot().State != resilience.StateOpen {
			return true
		}
	}
	return false
}

func (c *ServiceClient) choose(tried, refused []*instance, anyState bool) *instance {
	var buf [maxPickBuffer]*instance
	cands := buf[:0]
	fresh := 0 // cands[:fresh] were not tried, in listed order
	for _, in := range c.instances() {
		if slices.Contains(refused, in) || (!anyState && !c.connected(in)) {
			continue
		}
		if slices.Contains(tried, in) {
			cands = append(cands, in)
			continue
		}
		cands = slices.Insert(cands, fresh, in)
		fresh++
	}
	if fresh > 0 {
		cands = cands[:fresh]
	}
	n := len(cands)
	switch {
	case n == 0:
		return nil
	case n == 1 || c.up.Balancing == BalancePickFirst:
		return cands[0]
	case c.up.Balancing == BalanceLeastRequest:
		i, j := rand.IntN(n), rand.IntN(n-1)
		if j >= i {
			j++
		}
		if cands[j].outstanding.Load() < cands[i].outstanding.Load() {
			return cands[j]
		}
		return cands[i]
	}
	// Round robin over the candidates whose breakers take a call now: were
	// an ejected instance's turn passed to pick's next round, which takes
	// a turn of its own, the instance after it would be skipped and the one
	// after that get its share and the ejected one's (3 in 4 of 3 instances).
	var takeBuf [maxPickBuffer]*instance
	take := takeBuf[:0]
	for _, in := range cands {
		if !in.breaker.Load().Refuses() {
			take = append(take, in)
		}
	}
	if len(take) > 0 {
		cands = take
	}
	return cands[int(c.next.Add(1)%uint64(len(cands)))]
}

// reconnected gives in a fresh breaker if its channel was lost since it was
// last READY and its breaker is not closed (see connected).
func (c *ServiceClient) reconnected(in *instance) {
	if in.lost.Load() && in.lost.CompareAndSwap(true, false) && in.breaker.Load().Snapshot().State != resilience.StateClosed {
		in.breaker.Store(in.newBreaker())
		c.metrics.instances.Refresh()
		c.logger.Info("upstream instance connects again: its breaker is closed", slog.String("upstream", c.up.Name), slog.String("instance", in.addr))
	}
}

// instancesState returns the connectivity of the best-connected instance's
// channel: READY when any instance is.
func (c *ServiceClient) instancesState() connectivity.State {
	rank := map[connectivity.State]int{connectivity.Ready: 4, connectivity.Idle: 3, connectivity.Connecting: 2, connectivity.TransientFailure: 1}
	best := connectivity.Shutdown
	for _, in := range c.instances() {
		if s := in.conn.GetState(); rank[s] > rank[best] {
			best = s
		}
	}
	return best
}

// instancesMeta is the upstream's instances in /ready: each one's breaker,
// channel and outstanding attempts. It also returns the instances whose
// breaker is open, each with its cool-down left.
func (c *ServiceClient) instancesMeta() (each map[string]any, ejected, halfOpen, skipped []string) {
	each = map[string]any{}
	for _, in := range c.instances() {
		s := in.breaker.Load().Snapshot()
		ch := in.conn.GetState()
		each[in.addr] = map[string]any{
			"breaker":     s.Meta(),
			"channel":     strings.ToLower(ch.String()),
			"outstanding": in.outstanding.Load(),
		}
		switch {
		case s.State == resilience.StateOpen:
			ejected = append(ejected, fmt.Sprintf("%s for %.1fs", in.addr, s.RetryAfter.Seconds()))
		case s.State == resilience.StateHalfOpen:
			halfOpen = append(halfOpen, in.addr)
		case ch == connectivity.TransientFailure:
			// Its breaker is closed, but a call picks it only when no
			// connected instance is left: a connection lost or refused, or
			// with health_check an instance reporting NOT_SERVING.
			skipped = append(skipped, in.addr)
		}
	}
	return each, ejected, halfOpen, skipped
}

// Instances returns each instance's breaker by its address, for /ready,
// tests and tools; nil for an upstream with a target.
func (c *ServiceClient) Instances() map[string]*resilience.Breaker {
	if !c.multi {
		return nil
	}
	out := map[string]*resilience.Breaker{}
	for _, in := range c.instances() {
		out[in.addr] = in.breaker.Load()
	}
	return out
}
