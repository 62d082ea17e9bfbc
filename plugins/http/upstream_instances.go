package http

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// An upstream with instances (instances, or discover = true) spreads each
// call's attempts over them: every attempt picks one (Instances.Pick), takes
// a ticket of that instance's own breaker and gives it the attempt's outcome
// when the loop reports it. The call is admitted without the upstream's
// breaker (resilience.RunOpts.NoBreaker): the upstream is refused only when
// every instance's breaker is open.

// DefaultResolveEvery is resolve_every's default: how often a discovered
// upstream's name is resolved again ([egress.DefaultResolveEvery], 5s).
const DefaultResolveEvery = egress.DefaultResolveEvery

// instanceTLS returns u's TLS configuration. With instances over https it
// verifies base_url's host name, which every instance serves (its
// certificate's), not the address an attempt dials.
func instanceTLS(u Upstream) *tls.Config {
	base, err := url.Parse(u.BaseURL)
	if err != nil || base.Scheme != "https" || (len(u.Instances) == 0 && !u.Discover) || (u.TLS != nil && u.TLS.ServerName != "") {
		return u.TLS
	}
	conf := &tls.Config{}
	if u.TLS != nil {
		conf = u.TLS.Clone()
	}
	conf.ServerName = base.Hostname()
	return conf
}

// newInstances returns the instance set of u, or nil when u has one
// instance (base_url's host, as resolved by the dialer). The instances'
// breakers feed the upstream's breaker metrics (c.metrics.instances).
//
// log is the client's logger without the upstream (c.logger's has it): the
// set's lines name the upstream themselves.
func newInstances(u Upstream, c *core, lookup func(context.Context, string) ([]netip.Addr, error), log *slog.Logger) (*egress.Instances, error) {
	o := egress.InstancesOpts{Plugin: "http", Name: u.Name, ResolveEvery: u.ResolveEvery, Lookup: lookup, Clock: c.clock,
		Log: cmp.Or(log, slog.New(slog.DiscardHandler)), OnChange: func([]*egress.Instance) { c.metrics.instances.Refresh() }}
	switch {
	case u.Discover:
		o.Discover = u.BaseURL
	case len(u.Instances) > 0:
		o.Static = u.Instances
	default:
		return nil, nil
	}
	set, err := egress.NewInstances(o)
	if err != nil {
		return nil, err
	}
	c.metrics.instances = c.metrics.dep.InstanceBreakers(func() []*resilience.Breaker {
		list := set.List()
		out := make([]*resilience.Breaker, len(list))
		for i, in := range list {
			out[i] = in.CurrentBreaker()
		}
		return out
	})
	return set, nil
}

// instanceBreaker returns in's breaker, made at its first attempt with the
// upstream's breaker keys and named "<upstream> <address>"; its
// transitions are the upstream's in the breaker metrics.
func (c *core) instanceBreaker(in *egress.Instance) *resilience.Breaker {
	return in.Breaker(func() *resilience.Breaker {
		var br *resilience.Breaker
		feed := func(ch resilience.StateChange) { c.metrics.instances.Transition(br, ch) }
		br = resilience.NewBreaker(c.up.BreakerConfig.Opts(c.up.Name+" "+in.Addr(), c.clock,
			resilience.LogStateChanges(c.logger, "http", c.up.BreakerCoolDown, feed)))
		return br
	})
}

// maxTried is how many instances one call remembers having tried without
// allocating: more than its attempts (3 by default).
const maxTried = 4

// instanceAttempt is what one call keeps of its instances: the attempt in
// flight's, those tried, those whose breaker refused the attempt being
// chosen.
type instanceAttempt struct {
	anyHealth bool             // every usable instance failed its health check: pick among them all
	inst      *egress.Instance // the attempt in flight's
	ticket    resilience.Ticket
	live      *egress.Instance // the streamed response's, until its body ends
	open      *resilience.OpenError
	tried     []*egress.Instance
	refused   []*egress.Instance
	usable    func(*egress.Instance) bool
	triedBuf  [maxTried]*egress.Instance
}

// choose picks the instance of the next attempt and takes its breaker's
// ticket. An instance whose breaker refuses is skipped for this attempt.
// With none left it returns the attempt's verdict: no answer, no evidence,
// no retry; the error is the soonest-ending *resilience.OpenError when
// breakers refused, or errNoInstance.
func (ia *instanceAttempt) choose(c *core, set *egress.Instances) (resilience.Verdict, bool) {
	if ia.usable == nil {
		if ia.tried == nil { // a hedge's branch starts with the call's tried and busy instances
			ia.tried = ia.triedBuf[:0]
		}
		ia.usable = func(in *egress.Instance) bool {
			return (ia.anyHealth || in.Healthy()) && !slices.Contains(ia.refused, in)
		}
	}
	ia.refused, ia.open, ia.anyHealth = ia.refused[:0], nil, false
	for {
		in := set.Pick(ia.tried, ia.usable)
		if in == nil && !ia.anyHealth {
			// Every instance a breaker lets through failed its health
			// check: the checks are ignored rather than the upstream
			// refused (a check path that fails everywhere is more likely
			// wrong than every instance down).
			ia.anyHealth = true
			continue
		}
		if in == nil {
			break
		}
		ticket, err := c.instanceBreaker(in).Allow()
		if err == nil {
			ia.inst, ia.ticket = in, ticket
			return resilience.Verdict{}, true
		}
		in.Done()
		ia.refused = append(ia.refused, in)
		var oe *resilience.OpenError
		if errors.As(err, &oe) && (ia.open == nil || oe.RetryAfter() < ia.open.RetryAfter()) {
			ia.open = oe
		}
	}
	if ia.open != nil {
		return resilience.Verdict{Err: ia.open, Outcome: resilience.Ignore, Unsent: true}, false
	}
	return resilience.Verdict{Err: noInstance(set), Outcome: resilience.Ignore, Unsent: true}, false
}

// another reports whether a retry of the attempt in flight would find
// another instance to go to: one neither tried nor this attempt's, usable
// as choose would find it, whose breaker is not open. It does not pick it
// (a retry picks again, by the balancer).
func (ia *instanceAttempt) another(c *core, set *egress.Instances) bool {
	for _, in := range set.List() {
		if in == ia.inst || slices.Contains(ia.tried, in) || !(ia.anyHealth || in.Healthy()) {
			continue
		}
		// An instance not called yet has no breaker: closed.
		if br := in.CurrentBreaker(); br == nil || br.Snapshot().State != resilience.StateOpen {
			return true
		}
	}
	return false
}

// noInstance is the error of an attempt that found the set empty: a
// discovered name not resolved yet, or resolved to nothing usable.
func noInstance(set *egress.Instances) error {
	st := set.State()
	if st.Error != "" {
		return fmt.Errorf("no instance to call: %s", st.Error)
	}
	return fmt.Errorf("no instance to call: %s resolved to none yet", st.Discover)
}

// report gives the attempt's instance its outcome (the loop's, after its
// cut-by-caller rule). keepLive keeps the instance outstanding when the
// attempt's streamed response is returned: its body is still read from it.
func (ia *instanceAttempt) report(rec resilience.AttemptRecord, keepLive bool) {
	in := ia.inst
	if in == nil {
		return
	}
	ia.inst = nil
	ia.ticket.DoneAttempt(rec.Verdict.Outcome) // a Hang by the silence rule, as the loop ends the call's ticket
	ia.tried = append(ia.tried, in)
	if keepLive && rec.Stop != resilience.StopNone {
		ia.live = in
		return
	}
	in.Done()
}

// takeLive returns the streamed response's instance, now the body's to end.
func (ia *instanceAttempt) takeLive() *egress.Instance {
	in := ia.live
	ia.live = nil
	return in
}

// target returns the attempt's URL: the call's, on the chosen instance.
func (ia *instanceAttempt) target(r *http.Request, call *url.URL) {
	base := ia.inst.Base()
	u := *call
	u.Scheme, u.Host = base.Scheme, base.Host
	if r.Host == "" {
		r.Host = call.Host // every instance is asked for the upstream's host
	}
	r.URL = &u
}

// instancesMeta is the upstream's instances in /ready: the set's state and
// each instance's breaker, outstanding attempts and health. It counts the
// instances ejected (breaker open, or health check failed) and all.
func instancesMeta(set *egress.Instances) (meta map[string]any, ejected, all int) {
	st := set.State()
	list := set.List()
	each := make(map[string]any, len(list))
	for _, in := range list {
		e := map[string]any{"outstanding": in.Outstanding()}
		if p, checked := in.Health(); checked {
			e["health"] = cmp.Or(p, "pass")
		}
		open := false
		if br := in.CurrentBreaker(); br != nil {
			s := br.Snapshot()
			e["breaker"] = s.Meta()
			open = s.State == resilience.StateOpen
		} else {
			// Not called yet: the members of a breaker just made, so
			// /ready has one shape for every breaker.
			e["breaker"] = resilience.BreakerSnapshot{State: resilience.StateClosed}.Meta()
		}
		if open || !in.Healthy() {
			ejected++
		}
		each[in.Addr()] = e
	}
	meta = map[string]any{"instances": each}
	if st.Discover != "" {
		meta["discover"] = st.Discover
		if !st.Resolved.IsZero() {
			meta["resolved"] = st.Resolved
		}
		if st.Error != "" {
			meta["resolve_error"] = st.Error
		}
		if len(st.Refused) > 0 {
			meta["refused"] = st.Refused
		}
	}
	return meta, ejected, len(list)
}

// halfOpenDetail names the instances whose breaker is half-open and that
// no failed health check ejects: each lets one call through to probe it, so
// they are not ejected, but neither are they known to answer.
func halfOpenDetail(set *egress.Instances) string {
	var out []string
	for _, in := range set.List() {
		if br := in.CurrentBreaker(); br != nil && in.Healthy() && br.Snapshot().State == resilience.StateHalfOpen {
			out = append(out, in.Addr())
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// ejectedDetail says which instances are skipped: their breaker open (and
// for how long) or their health check failed (and why).
func ejectedDetail(set *egress.Instances) string {
	var out []string
	for _, in := range set.List() {
		if br := in.CurrentBreaker(); br != nil {
			if s := br.Snapshot(); s.State == resilience.StateOpen {
				out = append(out, fmt.Sprintf("%s for %.1fs", in.Addr(), s.RetryAfter.Seconds()))
				continue
			}
		}
		if p, _ := in.Health(); p != "" {
			out = append(out, fmt.Sprintf("%s (%s)", in.Addr(), p))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
