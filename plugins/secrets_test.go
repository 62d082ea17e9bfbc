package plugins_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/db"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// secretCase is one secret-bearing key of one plugin: a configuration that
// holds a secret in it and boots, and one whose value is wrong and is refused.
// The secret is the sentinel; neither the config command, nor the boot
// errors, nor the boot's log may show it.
type secretCase struct {
	name     string
	enabled  string   // the [plugins] enabled list, quoted and comma-separated
	good     string   // TOML that boots, holding sentinel; "" when none can
	env      []string // the environment of the good boot, disagreeing with the file
	bad      string   // TOML whose value of the key is refused, holding sentinel
	badEnv   []string // the environment of the bad boot
	prod     bool     // app.env = "production" for the bad boot
	errKey   string   // the key the bad boot's error names
	sentinel string
}

func secretCases(t *testing.T) []secretCase {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	keyLine := strings.Split(keyPEM, "\n")[1] // the key's base64

	return []secretCase{
		{name: "db url password", errKey: "plugin.db.url", enabled: `"db"`, sentinel: "S3NTdb1",
			good: "[plugin.db]\nurl = \"postgres://app:S3NTdb1@db:5432/app\"",
			env:  []string{"JFAST_DB_URL=postgres://app:S3NTdb1@db2:5432/app"},
			bad:  "[plugin.db]\nurl = \"postgres://app:S3NTdb1@db:notaport/app\""},
		{name: "db url password with @ and :", errKey: "plugin.db.url", enabled: `"db"`, sentinel: "S3NTdb2",
			good: "[plugin.db]\nurl = \"postgres://app:S3NTdb2%40x%3Ay@db:5432/app\"",
			bad:  "[plugin.db]\nurl = \"postgres://app:S3NTdb2@x:y@db:5432/app\""},
		{name: "db key=value password", errKey: "plugin.db.url", enabled: `"db"`, sentinel: "S3NTdb3",
			good: "[plugin.db]\nurl = \"host=db user=app password=S3NTdb3 dbname=app\"",
			bad:  "[plugin.db]\nurl = \"host=db user=app password=S3NTdb3 dbname=app connect_timeout=soon\""},
		{name: "db tenant template", errKey: "plugin.db.tenant_url_template", enabled: `"db"`, sentinel: "S3NTdb4",
			good: "[plugin.db]\ntenant_url_template = \"postgres://app:S3NTdb4@db/t_{tenant}\"",
			bad:  "[plugin.db]\ntenant_url_template = \"postgres://app:S3NTdb4@db/t_one\""},
		{name: "db url of the wrong type", errKey: "plugin.db.url", enabled: `"db"`, sentinel: "S3NTdb5",
			good: "[plugin.db]\nurl = \"postgres://app:S3NTdb5@db/app\"",
			bad:  "[plugin.db]\nurl = [\"postgres://app:S3NTdb5@db/app\"]"},
		{name: "cache url password", errKey: "plugin.cache.url", enabled: `"cache"`, sentinel: "S3NTca1",
			good: "[plugin.cache]\nurl = \"redis://:S3NTca1@cache:6379/0\"",
			env:  []string{"JFAST_CACHE_URL=redis://:S3NTca1@cache2:6379/0"},
			bad:  "[plugin.cache]\nurl = \"memcached://:S3NTca1@cache:11211\""},
		{name: "auth hmac secret", errKey: "plugin.auth.secret", enabled: `"auth"`, sentinel: "S3NTau1",
			good: "[plugin.auth]\nmode = \"hmac\"\nsecret = \"S3NTau1-0123456789abcdef0123456789abcdef\"",
			env:  []string{"JFAST_AUTH_SECRET=S3NTau1-other-0123456789abcdef0123456789ab"},
			prod: true, bad: "[plugin.auth]\nmode = \"hmac\"\nsecret = \"S3NTau1\""},
		{name: "auth private key", errKey: "plugin.auth.private_key", enabled: `"auth"`, sentinel: keyLine,
			good: "[plugin.auth]\nmode = \"public_key\"\nissue = true\nprivate_key = '''\n" + keyPEM + "'''",
			bad:  "[plugin.auth]\nmode = \"public_key\"\nissue = true\nprivate_key = \"" + keyLine + "\""},
		{name: "auth jwks url", errKey: "plugin.auth.jwks_url", enabled: `"auth"`, sentinel: "S3NTau3",
			good: "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"https://u:S3NTau3@id.example/jwks.json\"",
			bad:  "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"ftp://u:S3NTau3@id.example/jwks.json\""},
		{name: "storage s3 secret key", errKey: "plugin.storage.disks.s3.access_key", enabled: `"storage"`, sentinel: "S3NTst1",
			good: "[plugin.storage]\ndefault = \"s3\"\n[plugin.storage.disks.s3]\ndriver = \"s3\"\nbucket = \"b\"\nregion = \"eu-west-1\"\naccess_key = \"AKIAEXAMPLE\"\nsecret_key = \"S3NTst1\"",
			bad:  "[plugin.storage]\ndefault = \"s3\"\n[plugin.storage.disks.s3]\ndriver = \"s3\"\nbucket = \"b\"\nregion = \"eu-west-1\"\nsecret_key = \"S3NTst1\""},
		{name: "storage signing key", errKey: "plugin.storage.disks.files.signing_key", enabled: `"storage"`, sentinel: "S3NTst2",
			good: "[plugin.storage]\ndefault = \"files\"\n[plugin.storage.disks.files]\ndriver = \"local\"\nroot = \"/tmp/jfast-secrets-test\"\nvisibility = \"private\"\nsigning_key = \"S3NTst2-0123456789abcdef0123456789abcdef\"",
			prod: true, bad: "[plugin.storage]\ndefault = \"files\"\n[plugin.storage.disks.files]\ndriver = \"local\"\nroot = \"/tmp/jfast-secrets-test\"\nvisibility = \"private\"\nsigning_key = \"S3NTst2\""},
		// URLs that may not carry credentials at all: refused without showing them.
		{name: "storage endpoint password", errKey: "plugin.storage.disks.s3.endpoint", enabled: `"storage"`, sentinel: "S3NTst3",
			bad: "[plugin.storage]\ndefault = \"s3\"\n[plugin.storage.disks.s3]\ndriver = \"s3\"\nbucket = \"b\"\nregion = \"eu-west-1\"\nendpoint = \"ftp://u:S3NTst3@s3 internal\""},
		{name: "mail password", errKey: "plugin.mail.password", enabled: `"db", "queue", "mail"`, sentinel: "S3NTml1",
			good: "[plugin.db]\nurl = \"postgres://db/app\"\n[plugin.mail]\nhost = \"smtp.example\"\nusername = \"u\"\npassword = \"S3NTml1\"\nfrom = \"shop@example.com\"",
			env:  []string{"JFAST_MAIL_PASSWORD=S3NTml1-env"},
			bad:  "[plugin.db]\nurl = \"postgres://db/app\"\n[plugin.mail]\nhost = \"smtp.example\"\nusername = \"u\"\npassword = [\"S3NTml1\"]\nfrom = \"shop@example.com\""},
		{name: "mail port of the wrong type", errKey: "plugin.mail.port", enabled: `"db", "queue", "mail"`, sentinel: "25zq9",
			bad: "[plugin.db]\nurl = \"postgres://db/app\"\n[plugin.mail]\nhost = \"smtp.example\"\nport = \"25zq9\"\nfrom = \"shop@example.com\""},
		{name: "rabbitmq url", errKey: "plugin.queue.rabbitmq.url", enabled: `"queue"`, sentinel: "S3NTqu1",
			good: "[plugin.queue]\nbackend = \"rabbitmq\"\n[plugin.queue.rabbitmq]\nurl = \"amqp://app:S3NTqu1@mq:5672/\"",
			env:  []string{"JFAST_QUEUE_RABBITMQ__URL=amqp://app:S3NTqu1-env@mq:5672/"},
			bad:  "[plugin.queue]\nbackend = \"rabbitmq\"\n[plugin.queue.rabbitmq]\nurl = \"http://app:S3NTqu1@mq:5672/\""},
		{name: "http header of any name", errKey: "plugin.http.upstreams.billing.headers", enabled: `"http"`, sentinel: "S3NTht1",
			good: "[plugin.http.upstreams.billing]\nbase_url = \"http://billing\"\n[plugin.http.upstreams.billing.headers]\nX-Partner-Auth = \"S3NTht1\"\nX-Tenant = \"S3NTht1-tenant\"",
			bad:  "[plugin.http.upstreams.billing]\nbase_url = \"http://billing\"\nheaders = \"X-Partner-Auth: S3NTht1\""},
		{name: "http header of the wrong type", errKey: "plugin.http.upstreams.billing.headers.Authorization", enabled: `"http"`, sentinel: "S3NTht2",
			good: "[plugin.http.upstreams.billing]\nbase_url = \"http://billing\"\n[plugin.http.upstreams.billing.headers]\nAuthorization = \"Bearer S3NTht2\"",
			bad:  "[plugin.http.upstreams.billing]\nbase_url = \"http://billing\"\n[plugin.http.upstreams.billing.headers]\nAuthorization = [\"Bearer S3NTht2\"]"},
		{name: "http base url password", errKey: "plugin.http.upstreams.billing.base_url", enabled: `"http"`, sentinel: "S3NTht3",
			bad: "[plugin.http.upstreams.billing]\nbase_url = \"https://u:S3NTht3@billing\""},
		{name: "http base url password in the environment", errKey: "plugin.http.upstreams.billing.base_url", enabled: `"http"`, sentinel: "S3NTht4",
			badEnv: []string{"JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL=ftp://u:S3NTht4@billing"},
			bad:    "[plugin.http.upstreams.billing]\nbase_url = \"http://billing\""},
		{name: "grpc metadata of any key", errKey: "plugin.grpc.upstreams.inventory.headers", enabled: `"grpc"`, sentinel: "S3NTgr1",
			good: "[plugin.grpc.upstreams.inventory]\ntarget = \"inventory:9000\"\nattempts = 1\n[plugin.grpc.upstreams.inventory.headers]\nx-partner-auth = \"S3NTgr1\"\nx-tenant = \"S3NTgr1-tenant\"",
			env:  []string{"JFAST_GRPC_UPSTREAMS__INVENTORY__HEADERS__X-PARTNER-AUTH=S3NTgr1-env"},
			bad:  "[plugin.grpc.upstreams.inventory]\ntarget = \"inventory:9000\"\nattempts = 1\nheaders = \"x-partner-auth: S3NTgr1\""},
		{name: "grpc metadata of the wrong type", errKey: "plugin.grpc.upstreams.inventory.headers.authorization", enabled: `"grpc"`, sentinel: "S3NTgr2",
			good: "[plugin.grpc.upstreams.inventory]\ntarget = \"inventory:9000\"\nattempts = 1\n[plugin.grpc.upstreams.inventory.headers]\nauthorization = \"Bearer S3NTgr2\"",
			bad:  "[plugin.grpc.upstreams.inventory]\ntarget = \"inventory:9000\"\nattempts = 1\n[plugin.grpc.upstreams.inventory.headers]\nauthorization = [\"Bearer S3NTgr2\"]"},
		{name: "llm api key", errKey: "plugin.llm.providers.openai.api_key", enabled: `"llm"`, sentinel: "S3NTllm1",
			good: "[plugin.llm.providers.openai]\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"gpt-4o-mini\"\napi_key = \"sk-S3NTllm1\"",
			env:  []string{"JFAST_LLM_PROVIDERS__OPENAI__API_KEY=sk-S3NTllm1-env"},
			bad:  "[plugin.llm.providers.openai]\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"gpt-4o-mini\"\napi_key = [\"sk-S3NTllm1\"]"},
		{name: "llm api key with a line break", errKey: "plugin.llm.providers.openai.api_key", enabled: `"llm"`, sentinel: "S3NTllm2",
			bad: "[plugin.llm.providers.openai]\nbase_url = \"https://api.openai.com/v1\"\nmodel = \"gpt-4o-mini\"\napi_key = \"sk-S3NTllm2\\n\""},
		{name: "llm base url password", errKey: "plugin.llm.providers.openai.base_url", enabled: `"llm"`, sentinel: "S3NTllm3",
			bad: "[plugin.llm.providers.openai]\nbase_url = \"https://u:S3NTllm3@api.openai.com/v1\"\nmodel = \"gpt-4o-mini\""},
		{name: "telemetry endpoint password", errKey: "plugin.telemetry.endpoint", enabled: `"telemetry"`, sentinel: "S3NTte1",
			bad: "[plugin.telemetry]\nendpoint = \"https://u:S3NTte1@otel:port/v1/traces\""},
	}
}

func allPlugins() []framework.Plugin {
	return []framework.Plugin{db.New(), cache.New(), auth.New(), storage.New(), queue.New(), mail.New(), jhttp.New(), telemetry.New(), llm.New(), jgrpc.New()}
}

// TestSecretsNeverPrint: for every plugin's secret-bearing keys, the config
// command, the boot's log (with a file and an environment that disagree) and
// the boot errors of a wrong value never show the secret.
func TestSecretsNeverPrint(t *testing.T) {
	t.Parallel()
	for _, c := range secretCases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			head := "[app]\nname = \"secrets\"\n[plugins]\nenabled = [" + c.enabled + "]\n"
			var logs bytes.Buffer
			if c.good != "" {
				goodBoot(t, c, head, &logs)
			}
			logs.Reset()
			badHead := head
			if c.prod {
				badHead = strings.Replace(head, "[app]\n", "[app]\nenv = \"production\"\n", 1)
			}
			_, err := framework.New(framework.Options{Plugins: allPlugins(), ConfigText: badHead + c.bad, Environ: c.badEnv, LogOutput: &logs})
			var ces framework.ConfigErrors
			if !errors.As(err, &ces) {
				t.Fatalf("the bad configuration: %v, want configuration errors", err)
			}
			if _, ok := jfasttest.Errors(ces).For(c.errKey); !ok {
				t.Errorf("no error for %s:\n%s", c.errKey, ces.Error())
			}
			if strings.Contains(ces.Error(), c.sentinel) || strings.Contains(logs.String(), c.sentinel) {
				t.Errorf("the boot errors show the secret:\n%s\n%s", ces.Error(), logs.String())
			}
		})
	}
}

// goodBoot boots c's good configuration: the config command and the log
// must not show the secret.
func goodBoot(t *testing.T, c secretCase, head string, logs *bytes.Buffer) {
	t.Helper()
	app, err := framework.New(framework.Options{Plugins: allPlugins(), ConfigText: head + c.good, Environ: c.env, LogOutput: logs})
	if err != nil {
		t.Fatalf("the good configuration is refused: %v", err)
	}
	var out strings.Builder
	if err := app.WriteEffectiveConfig(&out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), c.sentinel) {
		t.Errorf("the config command shows the secret:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "***") {
		t.Errorf("the config command masks nothing:\n%s", out.String())
	}
	if strings.Contains(logs.String(), c.sentinel) {
		t.Errorf("the boot's log shows the secret:\n%s", logs.String())
	}
}
