package framework_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

func TestMaskSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		// URL userinfo, whatever the password holds.
		{"postgres://app:pw@db:5432/app", "postgres://app:***@db:5432/app"},
		{"redis://:topsecret@cache:6379/0", "redis://:***@cache:6379/0"},
		{"postgres://app:p@ss@db/app", "postgres://app:***@db/app"},
		{"postgres://app:p:a:ss@db/app", "postgres://app:***@db/app"},
		{"postgres://app:p%40s%3As%2F@db/app", "postgres://app:***@db/app"},
		{"amqp://guest:guest@rabbit:5672/", "amqp://guest:***@rabbit:5672/"},
		// Quoted as Go's errors quote a URL: the quote ends it, not a space.
		{`parse "postgres://app:p ss@db/app": invalid character " " in host name`, `parse "postgres://app:***@db/app": invalid character " " in host name`},
		{"dial `redis://u:a b@h:1/0` refused", "dial `redis://u:***@h:1/0` refused"},
		// Inside text, several.
		{"from postgres://a:1@x/y to redis://:2@z/0.", "from postgres://a:***@x/y to redis://:***@z/0."},
		// Secret query parameters; the others kept.
		{"postgres://app@db/x?sslmode=disable&password=pw&application_name=o#f", "postgres://app@db/x?sslmode=disable&password=***&application_name=o#f"},
		{"https://id.example/jwks.json?api_key=k1&v=2", "https://id.example/jwks.json?api_key=***&v=2"},
		// key=value connection strings.
		{"host=db user=app password=pw dbname=app", "host=db user=app password=*** dbname=app"},
		{"host=db password='p w' dbname=app", "host=db password=*** dbname=app"},
		{"host=db password = pw dbname=app", "host=db password = *** dbname=app"},
		// Backslash escapes, as libpq reads them: the value goes on past them.
		{`host=db password='se cr\'et' dbname=app`, "host=db password=*** dbname=app"},
		{`host=db password=ab\ cd dbname=app`, "host=db password=*** dbname=app"},
		{`host=db password='a\\' dbname=app`, "host=db password=*** dbname=app"},
		{"token=abc123 retries=3", "token=*** retries=3"},
		// Nothing to mask: kept exactly.
		{"amqp://guest@rabbit:5672/", "amqp://guest@rabbit:5672/"},
		{"redis://cache:6379/0", "redis://cache:6379/0"},
		{"https://host:8080/a@b", "https://host:8080/a@b"},
		{"https://host/users/@me?x=1", "https://host/users/@me?x=1"},
		{"failed to connect to `user=app database=app`: refused", "failed to connect to `user=app database=app`: refused"},
		{"database=app user=app passwordless=true", "database=app user=app passwordless=true"},
		{"plain text", "plain text"},
		{"bypass=true", "bypass=true"},
		{"://nothing", "://nothing"},
		{"", ""},
	} {
		if got := framework.MaskSecrets(c.in); got != c.want {
			t.Errorf("MaskSecrets(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

// vaultConfig is a table with a deploy-key header table declared secret, a
// secret token, and deploy keys of other types.
type vaultConfig struct {
	URL     string            `koanf:"url"`
	Headers map[string]string `koanf:"headers"`
	Token   string            `koanf:"token_value"` // a name IsSecretKey does not know
	Port    int               `koanf:"port"`
	Wait    time.Duration     `koanf:"wait"`
	Retries int               `koanf:"retries"`
}

type vault struct{ cfg vaultConfig }

func (p *vault) Name() string { return "vault" }
func (p *vault) Config() any  { return &p.cfg }
func (p *vault) DeployKeys() []string {
	return []string{"url", "headers.*", "token_value", "port", "wait"}
}
func (p *vault) SecretKeys() []string { return []string{"headers.*", "token_value"} }
func (p *vault) Validate(v *framework.Validation) {
	if strings.Contains(p.cfg.URL, " ") {
		// As a parser would: quoting the URL it could not read.
		v.Error("url", fmt.Sprintf("parse %q: invalid character \" \" in host name", p.cfg.URL), `set url = "https://user:password@vault:8200"`)
	}
}

var (
	_ framework.SecretKeyer = (*vault)(nil)
	_ framework.DeployKeyer = (*vault)(nil)
)

// TestSecretTableIsMaskedWhole: every value of a header table declared
// secret is masked by the config command, whatever the header is called;
// the declared token too, though its name says nothing; URLs lose only their
// password.
func TestSecretTableIsMaskedWhole(t *testing.T) {
	t.Parallel()
	app, err := framework.New(framework.Options{
		Plugins:   []framework.Plugin{&vault{}},
		LogOutput: io.Discard,
		ConfigText: `[plugins]
enabled = ["vault"]
[plugin.vault]
url = "https://ops:hunter2@vault:8200/v1"
token_value = "tok-4f1c9e"
[plugin.vault.headers]
Authorization = "Bearer abc.def.ghi"
X-Partner-Auth = "partner-8d2e"
X-Tenant = "tenant-acme"
`,
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := app.WriteEffectiveConfig(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, secret := range []string{"hunter2", "tok-4f1c9e", "abc.def", "partner-8d2e", "tenant-acme"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q printed:\n%s", secret, out)
		}
	}
	for _, want := range []string{`url         = "https://ops:***@vault:8200/v1"`, `token_value = "***"`, `Authorization  = "***"`, `X-Partner-Auth = "***"`, `X-Tenant       = "***"`, `retries     = 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for key, want := range map[string]bool{
		"plugin.vault.headers.X-Tenant": true, "plugin.vault.token_value": true, "plugin.vault.url": false,
		"plugin.vault.retries": false, "plugin.other.password": true,
	} {
		if got := app.IsSecret(key); got != want {
			t.Errorf("IsSecret(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestBindingErrorsNeverQuoteDeployKeys: a value of the wrong type for a
// deploy key or a secret is refused without its value; a shape key's value is
// still quoted (it helps, and it is no secret); a validation message that
// quotes a URL loses the password.
func TestBindingErrorsNeverQuoteDeployKeys(t *testing.T) {
	t.Parallel()
	_, err := framework.New(framework.Options{
		Plugins:   []framework.Plugin{&vault{}},
		LogOutput: io.Discard,
		ConfigText: `[plugins]
enabled = ["vault"]
[plugin.vault]
port = "88-zq9-port"
wait = "zq9-wait"
headers = "Bearer zq9-token"
token_value = ["zq9-in-a-list"]
retries = "three"
`,
		Environ: []string{"JFAST_VAULT_URL=https://ops:hunter 2@vault:8200"},
	})
	var ces framework.ConfigErrors
	if !errors.As(err, &ces) {
		t.Fatalf("err = %v, want ConfigErrors", err)
	}
	text := ces.Error()
	for _, secret := range []string{"zq9", "hunter"} {
		if strings.Contains(text, secret) {
			t.Errorf("%q quoted:\n%s", secret, text)
		}
	}
	for _, want := range []string{
		"plugin.vault.port: must be an integer, got a string (not shown: plugin.vault.port is a deploy key or a secret)",
		"plugin.vault.wait: is not a duration: a string (not shown",
		"plugin.vault.headers: must be a table, got a string (not shown",
		"plugin.vault.token_value: must be a string, got a list (not shown",
		`plugin.vault.retries: must be an integer, got "three"`,
		`plugin.vault.url (JFAST_VAULT_URL): parse "https://ops:***@vault:8200"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("errors lack %q:\n%s", want, text)
		}
	}
}

// stringer is a value whose text holds a DSN.
type stringer struct{}

func (stringer) String() string { return "pool postgres://app:hunter2@db/app" }

// TestLogsAreMasked: the message, strings, errors and Stringers of every
// record, and of attributes added with With, reach the log masked; other
// text is untouched.
func TestLogsAreMasked(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"development", "production"} {
		t.Run(env, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			app, err := framework.New(framework.Options{LogOutput: &out, ConfigText: "[app]\nenv = \"" + env + "\"\nadmin_listen = \"127.0.0.1:0\"\n"})
			if err != nil {
				t.Fatal(err)
			}
			log := app.Logger().With(slog.String("dsn", "host=db user=app password=hunter2"))
			log.Error("connect to redis://:hunter2@cache:6379/0 failed",
				slog.Any("error", errors.New("dial postgres://app:hunter2@db/app: refused")),
				slog.Any("pool", stringer{}),
				slog.Group("g", slog.String("url", "amqp://u:hunter2@mq/")),
				slog.String("plain", "database=app user=app"),
				slog.Any("kinds", []string{"a", "b"}))
			logs := out.String()
			if strings.Contains(logs, "hunter2") {
				t.Fatalf("a secret reached the log:\n%s", logs)
			}
			for _, want := range []string{"redis://:***@cache", "postgres://app:***@db/app", "password=***", "amqp://u:***@mq/", "database=app user=app"} {
				if !strings.Contains(logs, want) {
					t.Errorf("log lacks %q:\n%s", want, logs)
				}
			}
			if env == "production" && !strings.Contains(logs, `"kinds":["a","b"]`) {
				t.Errorf("a list lost its shape:\n%s", logs)
			}
		})
	}
}

// TestAttributesNamedAsSecretsAreMasked: an attribute whose key names a
// secret (password, api_key, token, …, as IsSecretKey reads a configuration
// key) is masked whole, whatever its value holds: at the top of a record,
// inside a group, added with With, as a number or a byte slice; a group named
// as one is masked whole. A boolean (whether a token is set), an empty string
// and attributes with other names keep their values.
func TestAttributesNamedAsSecretsAreMasked(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"development", "production"} {
		t.Run(env, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			app, err := framework.New(framework.Options{LogOutput: &out, ConfigText: "[app]\nenv = \"" + env + "\"\nadmin_listen = \"127.0.0.1:0\"\n"})
			if err != nil {
				t.Fatal(err)
			}
			log := app.Logger().With("db.password", "hunter1")
			log.Info("connecting", "password", "hunter2", "api_key", "sk-live-hunter3",
				slog.Group("upstream", slog.String("Authorization", "Bearer hunter4"), slog.String("host", "billing")),
				slog.Group("credentials", slog.String("user", "hunter5")),
				slog.Int("pin_token", 424242), slog.Any("client_secret", []byte("hunter6")),
				slog.Bool("admin_token", true), slog.String("session_token", ""), slog.String("user", "app"))
			logs := out.String()
			for _, secret := range []string{"hunter", "424242"} {
				if strings.Contains(logs, secret) {
					t.Errorf("%q reached the log:\n%s", secret, logs)
				}
			}
			want := []string{"password=***", "api_key=***", "upstream.Authorization=***", "upstream.host=billing", "credentials=***", "pin_token=***", "client_secret=***", "admin_token=true", "session_token=\"\"", "user=app"}
			if env == "production" {
				want = []string{`"password":"***"`, `"api_key":"***"`, `"upstream":{"Authorization":"***","host":"billing"}`, `"credentials":"***"`, `"pin_token":"***"`, `"client_secret":"***"`, `"admin_token":true`, `"session_token":""`, `"user":"app"`}
			}
			for _, w := range want {
				if !strings.Contains(logs, w) {
					t.Errorf("log lacks %s:\n%s", w, logs)
				}
			}
		})
	}
}

// TestPanicValueIsMasked: a handler's panic value goes to the log through the
// same masking.
func TestPanicValueIsMasked(t *testing.T) {
	t.Parallel()
	type dial struct{ URL string }
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/error", func(http.ResponseWriter, *http.Request) {
			panic(errors.New("dial postgres://app:hunter2@db/app: refused"))
		})
		r.Get("/struct", func(http.ResponseWriter, *http.Request) {
			panic(dial{URL: "redis://:hunter2@cache:6379/0"})
		})
		return nil
	}})
	for _, path := range []string{"/error", "/struct"} {
		if r := svc.Get(t, path); r.Status != http.StatusInternalServerError {
			t.Fatalf("%s: %d", path, r.Status)
		}
	}
	logs := svc.Logs()
	if strings.Contains(logs, "hunter2") || !strings.Contains(logs, "postgres://app:***@db/app") || !strings.Contains(logs, "redis://:***@cache") {
		t.Fatalf("panic values not masked:\n%s", logs)
	}
}
