package main

import (
	"slices"
	"testing"

	"github.com/jfastframework/jfast/internal/roster"
)

// The jfast binary compiles in exactly the roster's plugins, each under its own
// name.
func TestBuiltinIsTheRoster(t *testing.T) {
	t.Parallel()
	for _, name := range roster.Names {
		if name == "observability" {
			continue
		}
		if builtin[name] == nil {
			t.Errorf("plugin %q is on the roster (internal/roster) but not in builtin (cmd/jfast/plugins.go): add its constructor there", name)
		}
	}
	for name, newPlugin := range builtin {
		if !roster.Has(name) {
			t.Errorf("builtin plugin %q is not on the roster: add it to roster.Names in internal/roster/roster.go", name)
		}
		if got := newPlugin().Name(); got != name {
			t.Errorf("builtin[%q] makes a plugin named %q", name, got)
		}
	}
	if got, want := pluginNames(), slices.DeleteFunc(slices.Clone(roster.Names), func(n string) bool { return n == "observability" }); !slices.Equal(got, want) {
		t.Errorf("pluginNames() = %v, want the roster's order %v", got, want)
	}
}
