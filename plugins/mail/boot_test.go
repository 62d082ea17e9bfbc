package mail_test

import (
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
)

// bootErrors builds (does not start) an App with the mail table and returns
// the configuration errors under plugin.mail.
func bootErrors(t *testing.T, env, table string) []framework.ConfigError {
	t.Helper()
	toml := `[app]
env = "` + env + `"
[plugins]
enabled = ["db", "queue", "mail"]
[plugin.db]
url = "` + dbURL() + `"
[plugin.mail]
` + table
	ce := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{db.New(), queue.New(), mail.New()}})
	var out []framework.ConfigError
	for _, e := range ce {
		if strings.HasPrefix(e.Key, "plugin.mail.") {
			out = append(out, e)
		}
	}
	return out
}

func TestBootRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, env, table string
		key              string // "" means no mail error
	}{
		{"defaults", "development", "", ""},
		{"port 0", "development", "port = 0", "plugin.mail.port"},
		{"port above 65535", "development", "port = 65536", "plugin.mail.port"},
		{"port 1", "development", "port = 1", ""},
		{"port 65535", "development", "port = 65535", ""},
		{"ssl and starttls", "development", "use_ssl = true\nuse_starttls = true", "plugin.mail.use_starttls"},
		{"ssl alone", "development", "use_ssl = true\nuse_starttls = false\nport = 465", ""},
		{"unknown transport", "development", `transport = "sendmail"`, "plugin.mail.transport"},
		{"zero connect_timeout", "development", "connect_timeout = 0", "plugin.mail.connect_timeout"},
		{"negative command_timeout", "development", `command_timeout = "-1s"`, "plugin.mail.command_timeout"},
		{"empty from in development", "development", `from = ""`, ""},
		{"invalid from in development", "development", `from = "shop"`, "plugin.mail.from"},
		{"empty from in production", "production", `from = ""`, "plugin.mail.from"},
		{"invalid from in production", "production", `from = "orders at example.com"`, "plugin.mail.from"},
		{"valid from in production", "production", `from = "Shop <orders@example.com>"`, ""},
		{"invalid reply_to", "development", `reply_to = "help"`, "plugin.mail.reply_to"},
		{"password in clear to a remote host", "development",
			"transport = \"smtp\"\nhost = \"smtp.example.com\"\nuse_starttls = false\nusername = \"u\"\npassword = \"boot-secret\"", "plugin.mail.username"},
		{"password in clear to loopback", "development",
			"transport = \"smtp\"\nhost = \"127.0.0.1\"\nuse_starttls = false\nusername = \"u\"\npassword = \"boot-secret\"", ""},
		{"bad queue name", "development", `queue = "Mail Jobs"`, "plugin.mail.queue"},
		{"queue name", "development", `queue = "mail"`, ""},
		{"smtp without host", "development", "transport = \"smtp\"\nhost = \"\"", "plugin.mail.host"},
		{"smtp with the host left to its default", "development", "transport = \"smtp\"", "plugin.mail.host"},
		{"log with the host left to its default", "development", "transport = \"log\"", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			errs := bootErrors(t, c.env, c.table)
			if c.key == "" {
				if len(errs) != 0 {
					t.Fatalf("mail errors %v, want none", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Key != c.key || errs[0].Fix == "" {
				t.Fatalf("mail errors %v, want one on %s with a fix", errs, c.key)
			}
			if strings.Contains(errs[0].Error(), "boot-secret") {
				t.Fatalf("the password is in the error: %v", errs[0])
			}
		})
	}
}

func TestCredentialsAndServerAreDeployKeys(t *testing.T) {
	t.Parallel()
	m := mail.New()
	app, err := jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"db\", \"queue\", \"mail\"]\n[plugin.db]\nurl = \"" + dbURL() + "\"\n[plugin.mail]\npassword = \"from-file\"\nport = 587\n",
		Plugins: []framework.Plugin{db.New(), queue.New(), m},
		Env:     map[string]string{"JFAST_MAIL_PASSWORD": "from-env", "JFAST_MAIL_USERNAME": "env-user", "JFAST_MAIL_PORT": "2525"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = app
	cfg := m.Config().(*mail.Config)
	if cfg.Password != "from-env" || cfg.Username != "env-user" || cfg.Port != 2525 {
		t.Fatalf("username/password/port = %q/%q/%d, want the environment's", cfg.Username, cfg.Password, cfg.Port)
	}
}

// The queue key's bad name is refused in the words of every name in the
// configuration, with the value quoted (the key is not the name), and a
// name offered only when the rule accepts it.
func TestBootRefusesBadQueueNameInTheSharedWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ queue, like string }{
		{"Mail", `"mail" would do; `},
		{"_mail", `"mail" would do; `},
		{"Mail Jobs", ""},
	} {
		errs := bootErrors(t, "development", "queue = \""+tc.queue+"\"")
		want := "rename it: a name is " + framework.NameRule + " (" + tc.like + "it names the queue of mail's jobs; empty is the queue plugin's default queue)"
		if len(errs) != 1 || errs[0].Problem != `"`+tc.queue+`" is not a valid queue name` || errs[0].Fix != want {
			t.Errorf("%s: %v, want the fix %q", tc.queue, errs, want)
		}
	}
}

// framework.md: boot errors never quote a deploy key's value but for a
// listening address or a host name. from and port are deploy keys: their
// errors name the key, the rule and the fix without the value, nor the
// address parser's message, which may quote it.
func TestBootErrorsNeverQuoteDeployKeyValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ table, value string }{
		{`from = "ops-relay.internal.corp"`, "ops-relay.internal.corp"},
		{`from = "a@example.com, ops-relay@internal.corp"`, "ops-relay"},
		{`from = "<ops-relay@internal.corp"`, "ops-relay"},
		{"port = 70000", "70000"},
	} {
		errs := bootErrors(t, "development", tc.table)
		if len(errs) != 1 || errs[0].Fix == "" {
			t.Fatalf("%s: mail errors %v, want one with a fix", tc.table, errs)
		}
		if strings.Contains(errs[0].Error(), tc.value) {
			t.Errorf("%s: the error quotes the deploy key's value: %s", tc.table, errs[0].Error())
		}
	}
}
