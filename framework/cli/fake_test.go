package cli_test

import (
	"context"
	"sync"
	"time"

	"github.com/jfastframework/jfast/framework"
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

type fakeConfig struct {
	Address string        `koanf:"address"`
	Timeout time.Duration `koanf:"timeout"`
}

// fakePlugin is a plugin with a table, a validation and a lifecycle to record.
type fakePlugin struct {
	name string
	cfg  fakeConfig
	rec  *recorder
}

func newFake(name string, rec *recorder) *fakePlugin {
	return &fakePlugin{name: name, rec: rec, cfg: fakeConfig{Timeout: 2 * time.Second}}
}

func (p *fakePlugin) Name() string                     { return p.name }
func (p *fakePlugin) Config() any                      { return &p.cfg }
func (p *fakePlugin) Validate(v *framework.Validation) { v.Deadline("timeout", p.cfg.Timeout) }

func (p *fakePlugin) Start(context.Context, *framework.App) error {
	if p.rec != nil {
		p.rec.add("start " + p.name)
	}
	return nil
}

func (p *fakePlugin) Stop(context.Context) error {
	if p.rec != nil {
		p.rec.add("stop " + p.name)
	}
	return nil
}
