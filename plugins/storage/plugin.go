package storage

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/readiness"
)

const pluginName = "storage"

// Plugin is the storage plugin: the disks of [plugin.storage.disks.<name>].
type Plugin struct {
	cfg      Config
	disks    map[string]*Disk
	names    []string // sorted
	fallback string   // the default disk's name
	log      *slog.Logger
}

// New returns the storage plugin with its defaults.
func New() *Plugin {
	return &Plugin{cfg: defaultConfig()}
}

// Name implements framework.Plugin.
func (p *Plugin) Name() string { return pluginName }

// Config implements framework.Configurable.
func (p *Plugin) Config() any { return &p.cfg }

// Validate implements framework.Validator.
func (p *Plugin) Validate(v *framework.Validation) { p.cfg.validate(v) }

// DeployKeys implements framework.DeployKeyer: addresses, buckets and
// credentials depend on where the service runs.
func (p *Plugin) DeployKeys() []string {
	return []string{
		"public_url",
		"disks.*.base_url", "disks.*.root", "disks.*.signing_key",
		"disks.*.bucket", "disks.*.region", "disks.*.endpoint",
		"disks.*.access_key", "disks.*.secret_key",
	}
}

// SecretKeys implements framework.SecretKeyer: each disk's URL signing key
// and S3 secret key. The access key (which credential is in use) is shown.
func (p *Plugin) SecretKeys() []string {
	return []string{"disks.*.signing_key", "disks.*.secret_key"}
}

// Start implements framework.Starter. It builds every disk's client without
// touching S3 or failing on a missing root: an outage at boot is reported by
// /ready and by the operations, never by the boot.
func (p *Plugin) Start(ctx context.Context, app *framework.App) error {
	p.log = app.Logger().With(slog.String("plugin", pluginName))
	m, err := newMetrics(app.Metrics())
	if err != nil {
		return err
	}
	clientMetrics := framework.NewClientMetrics()
	if err := clientMetrics.Register(app.Metrics()); err != nil {
		return err
	}
	p.names = slices.Sorted(maps.Keys(p.cfg.Disks))
	p.fallback = p.cfg.Default
	if p.fallback == "" && len(p.names) == 1 {
		p.fallback = p.names[0]
	}
	p.disks = make(map[string]*Disk, len(p.names))
	for _, name := range p.names {
		cfg := p.cfg.Disks[name]
		d := &Disk{name: name, driverName: cfg.Driver, visibility: Visibility(cfg.Visibility), metrics: m}
		switch cfg.Driver {
		case DriverLocal:
			key, random := []byte(cfg.SigningKey), false
			if len(key) == 0 {
				key, random = make([]byte, 32), true
				_, _ = rand.Read(key)
				p.log.Warn("storage disk has no signing_key: temporary URLs use a random key of this process and work only on this replica until it restarts",
					slog.String("disk", name), slog.String("fix", "set plugin.storage.disks."+name+".signing_key"))
			}
			s := &signer{disk: name, key: key, base: strings.TrimSuffix(p.cfg.PublicURL, "/") + p.cfg.RoutePrefix + "/" + name,
				clock: app.Clock(), random: random}
			ld := newLocalDriver(cfg, s)
			if _, err := ld.open(); err != nil {
				p.log.Warn("storage disk root is not usable yet; operations will retry it", slog.String("disk", name), slog.String("error", err.Error()))
			}
			d.drv = ld
		case DriverS3:
			sd, err := newS3Driver(ctx, cfg, s3TraceOptions(app)...)
			if err != nil {
				p.closeDisks()
				return fmt.Errorf("storage disk %q: %w", name, err)
			}
			d.drv = sd
			d.connect = cfg.ConnectTimeout
			dep := clientMetrics.For(pluginName, name)
			d.dep = dep
			d.policy = resilience.NewPolicy(resilience.PolicyOpts{
				Name: "storage." + name, Config: cfg.PolicyConfig, Clock: app.Clock(),
				OnStateChange: resilience.LogStateChanges(p.log.With(slog.String("disk", name)), pluginName, cfg.BreakerCoolDown, dep.Transition),
				OnAttempt:     dep.Attempt,
			})
			dep.Follow(d.policy.Breaker())
		}
		p.disks[name] = d
	}
	return nil
}

// Stop implements framework.Stopper: it closes idle S3 connections and the
// local roots.
func (p *Plugin) Stop(context.Context) error {
	p.closeDisks()
	return nil
}

func (p *Plugin) closeDisks() {
	for _, d := range p.disks {
		if d.drv != nil {
			d.drv.close()
		}
	}
}

// Check implements framework.Checker: every disk in parallel, each given two
// thirds of ctx's time (readiness_timeout), so the check answers in time with
// the disk that did not (see probe). A disk whose breaker is open is reported
// from the breaker, with no I/O; otherwise a HEAD of the bucket or a read of
// the root.
// An unreachable disk and an open breaker (opened by such failures) are both
// reported unreachable, so the verdict holds for the whole outage: /ready is
// unavailable only when [plugin.storage] critical = true; otherwise the
// service is degraded.
func (p *Plugin) Check(ctx context.Context) readiness.Report {
	type result struct {
		name     string
		err      error
		critical bool
		meta     map[string]any
	}
	results := make([]result, len(p.names))
	var wg sync.WaitGroup
	for i, name := range p.names {
		d := p.disks[name]
		results[i] = result{name: name, meta: map[string]any{"driver": d.driverName}}
		if ld, ok := d.drv.(*localDriver); ok && ld.signer.random {
			// Worth knowing when temporary URLs fail on another replica.
			results[i].meta["signing_key"] = "random, this process only"
		}
		wg.Go(func() {
			r := &results[i]
			if br := d.Breaker(); br != nil {
				s := br.Snapshot()
				r.meta["breaker"] = s.Meta()
				if s.State == resilience.StateOpen {
					// Not "after repeated failures": one hang opens it.
					r.err = fmt.Errorf("calls are suspended for %.1fs (breaker %s)", s.RetryAfter.Seconds(), s.State)
					r.critical = true
					return
				}
			}
			if err := probe(ctx, d); err != nil {
				r.err, r.critical = err, true
			}
		})
	}
	wg.Wait()
	disks := make(map[string]any, len(results))
	var failed []string
	critical := false
	for _, r := range results {
		r.meta["healthy"] = r.err == nil
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("disk %q: %s", r.name, errText(r.err)))
			critical = critical || r.critical
		}
		disks[r.name] = r.meta
	}
	meta := map[string]any{"disks": disks}
	if len(results) == 1 {
		if b, ok := results[0].meta["breaker"]; ok {
			meta["breaker"] = b // the usual place, for a service with one disk
		}
	}
	if len(failed) > 0 {
		if critical {
			return readiness.Unreachable("storage unavailable: "+strings.Join(failed, "; "), meta)
		}
		return readiness.Impaired("storage unavailable: "+strings.Join(failed, "; "), meta)
	}
	return readiness.Passed(fmt.Sprintf("%d disk(s) reachable", len(results)), meta)
}

// errText is a check error for /ready: the SDK's text without request IDs, and
// never a credential (the SDK puts none in its errors).
func errText(err error) string {
	s := err.Error()
	if i := strings.Index(s, ", request id:"); i > 0 {
		s = s[:i]
	}
	return s
}

// MountRoutes implements framework.RouteMounter: the route that serves the
// temporary URLs of local disks.
func (p *Plugin) MountRoutes(r chi.Router) {
	h := framework.Handler(p.serveSigned)
	r.Method(http.MethodGet, p.cfg.RoutePrefix+"/*", h)
	r.Method(http.MethodHead, p.cfg.RoutePrefix+"/*", h)
}

// Disk returns the disk called name, or the default disk for "".
func (p *Plugin) Disk(name string) (*Disk, error) {
	if name == "" {
		name = p.fallback
	}
	if d := p.disks[name]; d != nil {
		return d, nil
	}
	return nil, fmt.Errorf("storage: no disk %q; configure [plugin.storage.disks.%s] (configured: %s)", name, name, strings.Join(p.names, ", "))
}

// Default returns the default disk.
func (p *Plugin) Default() *Disk { return p.disks[p.fallback] }

// From returns the storage plugin of a started App.
func From(app *framework.App) (*Plugin, error) {
	return framework.Get[*Plugin](app, pluginName)
}

// For returns the disk called name ("" for the default disk), for a service's
// Routes function: asking for a disk that is not configured returns an error,
// which fails the boot.
func For(app *framework.App, name string) (*Disk, error) {
	return framework.GetNamed(app, pluginName, (*Plugin).Disk, name)
}

// UsesDependency reports whether a disk is an S3 bucket: local disks have no
// server to take away. The drill command asks it (drills.DependencyUser).
func (p *Plugin) UsesDependency() bool {
	for _, d := range p.cfg.Disks {
		if d.Driver == DriverS3 {
			return true
		}
	}
	return false
}

var (
	_ framework.ClientPlugin    = (*Plugin)(nil)
	_ framework.Stopper         = (*Plugin)(nil)
	_ framework.RouteMounter    = (*Plugin)(nil)
	_ framework.Defaulter       = (*DiskConfig)(nil)
	_ framework.ConditionalKeys = DiskConfig{}
)
