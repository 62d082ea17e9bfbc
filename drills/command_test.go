package drills_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
)

// namedPlugin is a plugin with nothing but a name: the drill command only asks
// which plugins are enabled.
type namedPlugin string

func (p namedPlugin) Name() string { return string(p) }

func runDrill(t *testing.T, opts framework.Options, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.NewCommand(opts, drills.Command), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// With no container named for a plugin's dependency, drill skips it with a
// line naming the variable to set, and exits 0; mistakes in the flags are 2.
func TestCommandSkipsPluginsWithoutContainers(t *testing.T) {
	t.Setenv("JFAST_DRILL_REDIS_CONTAINER", "")
	opts := framework.Options{
		Plugins:    []framework.Plugin{namedPlugin("cache")},
		ConfigText: "[plugins]\nenabled = [\"observability\", \"cache\"]\n",
		Environ:    []string{},
	}
	code, out, errOut := runDrill(t, opts, "drill", "--url", "http://127.0.0.1:1", "--route", "/products")
	if code != 0 || !strings.Contains(out, "SKIP cache: JFAST_DRILL_REDIS_CONTAINER names no container") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runDrill(t, opts, "drill", "--want", "cache=fast"); code != 2 || !strings.Contains(errOut, "--want") {
		t.Fatalf("a bad --want: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runDrill(t, opts, "drill", "--help"); code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--config") {
		t.Fatalf("drill --help: exit %d\n%s", code, out)
	}
}

// A service that does not pass drills.Command has no drill command.
func TestNoDrillCommandUnlessAsked(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.NewCommand(framework.Options{Environ: []string{}}), []string{"drill"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `unknown command "drill"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
