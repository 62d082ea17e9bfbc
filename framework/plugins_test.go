package framework_test

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/readiness"
)

// recorder records lifecycle events of the test plugins, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// fakeConfig is the table of a test plugin.
type fakeConfig struct {
	Address string            `koanf:"address"`
	Timeout time.Duration     `koanf:"timeout"`
	Retries int               `koanf:"retries"`
	Secret  string            `koanf:"secret"`
	Targets map[string]target `koanf:"targets"`
}

type target struct {
	URL     string        `koanf:"url"`
	Timeout time.Duration `koanf:"timeout"`
}

func (t *target) SetDefaults() { t.Timeout = 5 * time.Second }

// fakePlugin is a plugin under test: its behaviour is set per test.
type fakePlugin struct {
	name     string
	cfg      fakeConfig
	deps     []framework.Dependency
	rec      *recorder
	startErr error
	check    func(ctx context.Context) readiness.Report
}

func newFake(name string, rec *recorder) *fakePlugin {
	return &fakePlugin{name: name, rec: rec, cfg: fakeConfig{Timeout: 2 * time.Second, Retries: 2}}
}

func (p *fakePlugin) Name() string                               { return p.name }
func (p *fakePlugin) Config() any                                { return &p.cfg }
func (p *fakePlugin) DeployKeys() []string                       { return []string{"address", "secret", "targets.*.url"} }
func (p *fakePlugin) Dependencies() []framework.Dependency       { return p.deps }
func (p *fakePlugin) Validate(v *framework.Validation)           { p.validate(v) }
func (p *fakePlugin) Check(ctx context.Context) readiness.Report { return p.runCheck(ctx) }

func (p *fakePlugin) validate(v *framework.Validation) {
	v.Deadline("timeout", p.cfg.Timeout)
	for name, t := range p.cfg.Targets {
		v.Sub("targets."+name).Deadline("timeout", t.Timeout)
	}
}

func (p *fakePlugin) Start(ctx context.Context, app *framework.App) error {
	if p.rec != nil {
		p.rec.add("start " + p.name)
	}
	return p.startErr
}

func (p *fakePlugin) Stop(ctx context.Context) error {
	if p.rec != nil {
		p.rec.add("stop " + p.name)
	}
	return nil
}

func (p *fakePlugin) runCheck(ctx context.Context) readiness.Report {
	if p.check != nil {
		return p.check(ctx)
	}
	if p.cfg.Address == "" {
		return readiness.Passed("nothing to check", nil)
	}
	// Dial lazily, as real plugins do: an unreachable dependency is a report, not
	// a boot failure.
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", p.cfg.Address)
	if err != nil {
		return readiness.Unreachable("unreachable: "+err.Error(), nil)
	}
	conn.Close()
	return readiness.Passed("reachable", nil)
}
