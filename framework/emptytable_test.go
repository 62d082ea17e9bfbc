package framework_test

import (
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func TestEmptyTableKeepsEnvironmentValues(t *testing.T) {
	t.Parallel()
	for range 20 {
		p := newFake("fake", nil)
		_, err := jfasttest.New(t, jfasttest.Options{
			TOML:    "[plugins]\nenabled = [\"fake\"]\n[plugin.fake]\n",
			Plugins: []framework.Plugin{p},
			Env:     map[string]string{"JFAST_FAKE_ADDRESS": "env-host:2"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if p.cfg.Address != "env-host:2" {
			t.Fatalf("an empty [plugin.fake] table hid JFAST_FAKE_ADDRESS: address = %q", p.cfg.Address)
		}
	}
}
