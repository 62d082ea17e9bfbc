package drills_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/drills"
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
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
// line naming the variable to set; with no drill run at all it exits 1, so a
// run that proved nothing does not pass. Mistakes in the flags are 2.
func TestCommandSkipsPluginsWithoutContainers(t *testing.T) {
	t.Setenv("JFAST_DRILL_REDIS_CONTAINER", "")
	opts := framework.Options{
		Plugins:    []framework.Plugin{namedPlugin("cache")},
		ConfigText: "[plugins]\nenabled = [\"observability\", \"cache\"]\n",
		Environ:    []string{},
	}
	code, out, errOut := runDrill(t, opts, "drill", "--url", "http://127.0.0.1:1", "--route", "/products")
	if code != 1 || !strings.Contains(out, "SKIP cache: JFAST_DRILL_REDIS_CONTAINER names no container") || !strings.Contains(errOut, "no drill ran") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runDrill(t, opts, "drill", "--want", "cache=fast"); code != 2 || !strings.Contains(errOut, "--want") {
		t.Fatalf("a bad --want: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runDrill(t, opts, "drill", "--help"); code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--config") {
		t.Fatalf("drill --help: exit %d\n%s", code, out)
	}
}

// A drill runs only the faults of the dependencies the configuration uses: auth
// in hmac mode, mail with the log transport and storage with a local disk have
// none, so they get no row; in jwks mode, with smtp and with an s3 disk they
// do.
func TestCommandDrillsOnlyTheDependenciesInUse(t *testing.T) {
	for _, v := range []string{"JWKS", "SMTP", "S3"} {
		t.Setenv(drills.ContainerVar(v), "")
	}
	const common = `[plugins]
enabled = ["observability", "db", "queue", "auth", "mail", "storage"]
[plugin.db]
url = "postgres://postgres@127.0.0.1:5432/test"
[plugin.queue]
workers = false
[plugin.storage]
default = "files"
`
	cases := []struct {
		name, toml string
		drilled    []string // SKIP lines expected, one per dependency in use
		notDrilled []string
	}{
		{"nothing remote", common + `[plugin.auth]
mode = "hmac"
secret = "0123456789abcdef0123456789abcdef"
[plugin.mail]
transport = "log"
[plugin.storage.disks.files]
driver = "local"
root = "/tmp/jfast-drill-test"
`, nil, []string{"auth", "mail", "storage"}},
		{"everything remote", common + `[plugin.auth]
mode = "jwks"
jwks_url = "https://idp.example/jwks.json"
[plugin.mail]
transport = "smtp"
host = "127.0.0.1"
[plugin.storage.disks.files]
driver = "s3"
bucket = "files"
endpoint = "http://127.0.0.1:9000"
path_style = true
`, []string{"auth", "mail", "storage"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := framework.Options{
				Plugins:    []framework.Plugin{db.New(), queue.New(), auth.New(), mail.New(), storage.New()},
				ConfigText: c.toml,
				Environ:    []string{},
			}
			_, out, errOut := runDrill(t, opts, "drill", "--url", "http://127.0.0.1:1", "--route", "/x", "--only", "auth,mail,storage")
			for _, p := range c.drilled {
				if !strings.Contains(out, "SKIP "+p+":") {
					t.Errorf("no row for %s:\n%s%s", p, out, errOut)
				}
			}
			for _, p := range c.notDrilled {
				if strings.Contains(out, "SKIP "+p+":") || !strings.Contains(out, "no drill for "+p+":") {
					t.Errorf("%s has a row though its configuration uses no dependency:\n%s%s", p, out, errOut)
				}
			}
			// A usage mistake is its one line and the hint: nothing before it.
			code, out, errOut := runDrill(t, opts, "drill", "--want", "cache=abc")
			if code != 2 || out != "" || strings.Count(errOut, "\n") != 2 {
				t.Errorf("a bad --want: exit %d, stdout %q, stderr %q; want 2, nothing on stdout, one line and the hint", code, out, errOut)
			}
		})
	}
}

var (
	_ drills.DependencyUser = (*auth.Plugin)(nil)
	_ drills.DependencyUser = (*mail.Plugin)(nil)
	_ drills.DependencyUser = (*storage.Plugin)(nil)
)

// A service that does not pass drills.Command has no drill command.
func TestNoDrillCommandUnlessAsked(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.NewCommand(framework.Options{Environ: []string{}}), []string{"drill"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `unknown command "drill"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
