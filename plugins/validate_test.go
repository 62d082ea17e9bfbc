package plugins_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/channels"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/gateway"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/idempotency"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// validateSpy wraps a plugin and records its configuration as Validate found
// it and as Validate left it.
type validateSpy struct {
	framework.Plugin
	cfg           any
	before, after string
}

func (s *validateSpy) Config() any {
	s.cfg = s.Plugin.(framework.Configurable).Config()
	return s.cfg
}

func (s *validateSpy) ResolveDefaults(r *framework.Resolution) {
	if rp, ok := s.Plugin.(framework.Resolver); ok {
		rp.ResolveDefaults(r)
	}
}

func (s *validateSpy) Validate(v *framework.Validation) {
	s.before = fmt.Sprintf("%#v", reflect.ValueOf(s.cfg).Elem().Interface())
	s.Plugin.(framework.Validator).Validate(v)
	s.after = fmt.Sprintf("%#v", reflect.ValueOf(s.cfg).Elem().Interface())
}

// TestValidateOnlyReads enables each plugin with an empty table (where defaults
// that depend on other settings must be filled) and checks that Validate set no
// field: defaults are resolved in one step before it, so the config command
// shows them and Validate checks what will run.
func TestValidateOnlyReads(t *testing.T) {
	t.Parallel()
	for _, p := range []framework.Plugin{auth.New(), cache.New(), channels.New(), db.New(), jhttp.New(), idempotency.New(), mail.New(), queue.New(), storage.New(), telemetry.New(), jgrpc.New(), gateway.New(), llm.New()} {
		spy := &validateSpy{Plugin: p}
		_, _ = framework.New(framework.Options{
			Plugins:    []framework.Plugin{spy},
			ConfigText: fmt.Sprintf("[app]\nname = \"pure\"\n[plugins]\nenabled = [%q]\n", p.Name()),
			Environ:    []string{},
		})
		if spy.before == "" {
			t.Errorf("%s: Validate was not called", p.Name())
			continue
		}
		if spy.before != spy.after {
			t.Errorf("%s: Validate changed the configuration:\nbefore %s\nafter  %s", p.Name(), spy.before, spy.after)
		}
	}
}
