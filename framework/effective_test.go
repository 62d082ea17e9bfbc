package framework_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jfast.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// effectiveConfig builds an App from opts and returns what the config
// command prints for it.
func effectiveConfig(t *testing.T, opts framework.Options) string {
	t.Helper()
	app, err := framework.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := app.WriteEffectiveConfig(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// resettingFake's Config returns a fresh value holding the defaults, as some
// plugins' do: config must still show the bound values.
type resettingFake struct{ *fakePlugin }

func (p resettingFake) Config() any {
	p.cfg = fakeConfig{Timeout: 2 * time.Second, Retries: 2}
	return &p.cfg
}

func TestConfigShowsValuesSourcesAndMasksSecrets(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `[app]
name = "orders"
request_timeout = "45s"
[plugins]
enabled = ["fake", "observability"]
[plugin.fake]
critical = true
retries = 4
[plugin.fake.targets.billing]
url = "https://bill:hunter2@billing.internal/v1"
`)
	opts := framework.Options{
		Plugins:   []framework.Plugin{resettingFake{newFake("fake", nil)}},
		LogOutput: io.Discard,
		Environ:   []string{"JFAST_FAKE_SECRET=s3cr3t-value", "JFAST_FAKE_ADDRESS=postgres://app:pw@db:5432/app?sslmode=disable password=other", "JFAST_APP_LISTEN=0.0.0.0:9000"},
	}
	opts.ConfigFile = path
	out := effectiveConfig(t, opts)
	for _, secret := range []string{"hunter2", "s3cr3t", ":pw@", "other"} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q printed:\n%s", secret, out)
		}
	}
	for _, want := range []string{
		"\n[app]\n",
		`name                = "orders"        # file`,
		`listen              = "0.0.0.0:9000"  # env JFAST_APP_LISTEN`,
		`request_timeout     = "45s"           # file`,
		`shutdown_timeout    = "20s"           # default`,
		`idle_timeout        = "2m"            # default`,
		"\n[plugins]\nenabled = [\"fake\", \"observability\"]  # file\n",
		"\n[plugin.fake]\n",
		`critical = true`,
		`secret   = "***"`,
		`# env JFAST_FAKE_SECRET`,
		`address  = "postgres://app:***@db:5432/app?sslmode=disable password=***"  # env JFAST_FAKE_ADDRESS`,
		`retries  = 4 `,
		"\n[plugin.fake.targets.billing]\n",
		`url     = "https://bill:***@billing.internal/v1"  # file`,
		`timeout = "5s"                                    # default`,
		"\n[plugin.observability]\ncritical        = false       # default\nmetrics_path    = \"/metrics\"  # default\nruntime_metrics = true        # default\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "[plugin.fake]") > strings.Index(out, "[plugin.observability]") {
		t.Error("plugin tables are not in [plugins] enabled order")
	}
}

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"plugin.db.password": true, "plugin.auth.secret": true, "plugin.storage.disks.s3.secret_key": true,
		"plugin.storage.signing_key": true, "plugin.auth.private_key": true, "plugin.x.token": true,
		"plugin.x.api_key": true, "plugin.mail.smtp_password": true, "plugin.x.client_secret": true,
		"plugin.db.url": false, "plugin.auth.public_key": false, "app.name": false, "plugin.cache.key_prefix": false,
		"plugin.x.token_ttl": false,
		// an upstream's configured headers
		"plugin.http.upstreams.billing.headers.Authorization":       true,
		"plugin.http.upstreams.billing.headers.Proxy-Authorization": true,
		"plugin.http.upstreams.billing.headers.X-Api-Key":           true,
		"plugin.http.upstreams.billing.headers.X-Auth-Token":        true,
		"plugin.http.upstreams.billing.headers.Cookie":              true,
		"plugin.http.upstreams.billing.headers.Accept":              false,
		"plugin.http.upstreams.billing.headers.X-Tenant":            false,
	} {
		if got := framework.IsSecretKey(key); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// A free-form table written with dotted keys (region.zone = "a") holds
// nested maps: config writes them back as the dotted keys, with the file as
// their source, so its output read again is the same table.
func TestConfigShowsDottedKeysAsWritten(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, kennelHead+"[plugin.kennel.attributes]\ndeployment.region = \"eu\"\nteam = \"a\"\n\"x.y\" = \"q\"\nn = { a.b = 1 }\n")
	out := effectiveConfig(t, framework.Options{ConfigFile: path, Plugins: []framework.Plugin{&kennel{}}, LogOutput: io.Discard})
	for _, line := range []string{`deployment.region = "eu"  # file`, `n.a.b             = 1     # file`, `"x.y"             = "q"   # file`} {
		if !strings.Contains(out, line) {
			t.Errorf("config lacks %q:\n%s", line, out)
		}
	}
	k := &kennel{}
	if _, err := framework.New(framework.Options{ConfigFile: writeConfig(t, out), Plugins: []framework.Plugin{k}, LogOutput: io.Discard}); err != nil {
		t.Fatalf("config's output read again: %v\n%s", err, out)
	}
	region, _ := k.cfg.Attributes["deployment"].(map[string]any)
	if region["region"] != "eu" || k.cfg.Attributes["x.y"] != "q" {
		t.Errorf("attributes read again: %v", k.cfg.Attributes)
	}
}
