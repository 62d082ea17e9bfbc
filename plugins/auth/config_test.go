package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/auth"
)

// configErrors builds the App and returns its configuration errors.
func configErrors(t *testing.T, toml string, env map[string]string) jfasttest.Errors {
	t.Helper()
	return jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: []framework.Plugin{auth.New()}, Env: env})
}

func hasKey(es jfasttest.Errors, key string) bool {
	_, ok := es.For(key)
	return ok
}

// TestBootRules has one case per boot rule of [plugin.auth]: each bad table must
// fail with an error on its key, and the good twin next to it must boot.
func TestBootRules(t *testing.T) {
	t.Parallel()
	testKeys(t)
	dir := t.TempDir()
	pubFile := filepath.Join(dir, "rsa1.pub.pem")
	if err := os.WriteFile(pubFile, []byte(publicPEM(t, &rsa1.PublicKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	const head = "[plugins]\nenabled = [\"auth\"]\n"
	prod := "[app]\nenv = \"production\"\n" + head
	rsaPub := tomlString(publicPEM(t, &rsa1.PublicKey))
	cases := []struct {
		name string
		toml string
		env  map[string]string
		key  string // "" means the table must be valid
	}{
		{"mode is required", head + "[plugin.auth]\n", nil, "plugin.auth.mode"},
		{"mode must be known", head + "[plugin.auth]\nmode = \"oauth\"\n", nil, "plugin.auth.mode"},
		{"hmac needs a secret", head + "[plugin.auth]\nmode = \"hmac\"\n", nil, "plugin.auth.secret"},
		{"hmac with a short secret outside production", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"short\"\n", nil, ""},
		{"production: hmac secret under 32 bytes", prod + "[plugin.auth]\nmode = \"hmac\"\n", map[string]string{"JFAST_AUTH_SECRET": strings.Repeat("s", 31)}, "plugin.auth.secret"},
		{"production: hmac secret of 32 bytes", prod + "[plugin.auth]\nmode = \"hmac\"\n", map[string]string{"JFAST_AUTH_SECRET": strings.Repeat("s", 32)}, ""},
		{"jwks needs jwks_url", head + "[plugin.auth]\nmode = \"jwks\"\n", nil, "plugin.auth.jwks_url"},
		{"jwks_url must be an http(s) URL", head + "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"issuer.example/jwks\"\n", nil, "plugin.auth.jwks_url"},
		{"jwks_url over http outside production", head + "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"http://issuer.test/jwks\"\n", nil, ""},
		{"production: jwks_url over plain http", prod + "[plugin.auth]\nmode = \"jwks\"\n", map[string]string{"JFAST_AUTH_JWKS_URL": "http://issuer.test/jwks"}, "plugin.auth.jwks_url"},
		{"production: jwks_url over https", prod + "[plugin.auth]\nmode = \"jwks\"\n", map[string]string{"JFAST_AUTH_JWKS_URL": "https://issuer.test/jwks"}, ""},
		{"an algorithm the JWT library does not know", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\nalgorithms = [\"HS256\", \"HS999\"]\n", nil, "plugin.auth.algorithms[1]"},
		{"algorithms from the environment, comma-separated", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\n", map[string]string{"JFAST_AUTH_ALGORITHMS": "HS256,HS999"}, "plugin.auth.algorithms[1]"},
		{"alg none is never accepted", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\nalgorithms = [\"none\"]\n", nil, "plugin.auth.algorithms[0]"},
		{"hmac mode with an RSA algorithm", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\nalgorithms = [\"RS256\"]\n", nil, "plugin.auth.algorithms[0]"},
		{"RSA public key with an ECDSA algorithm", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = " + rsaPub + "\nalgorithms = [\"ES256\"]\n", nil, "plugin.auth.algorithms[0]"},
		{"P-384 key with ES256", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = " + tomlString(publicPEM(t, &ec384.PublicKey)) + "\nalgorithms = [\"ES256\"]\n", nil, "plugin.auth.algorithms[0]"},
		{"jwks mode with an HMAC algorithm", head + "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"https://issuer.test/jwks\"\nalgorithms = [\"HS256\"]\n", nil, "plugin.auth.algorithms[0]"},
		{"public_key mode needs a key", head + "[plugin.auth]\nmode = \"public_key\"\n", nil, "plugin.auth.public_key"},
		{"public_key that is not PEM", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = \"-----BEGIN PUBLIC KEY-----\\nnot base64\\n\"\n", nil, "plugin.auth.public_key"},
		{"public_key file that does not exist", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = \"" + filepath.Join(dir, "missing.pem") + "\"\n", nil, "plugin.auth.public_key"},
		{"public_key from a file", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = \"" + pubFile + "\"\n", nil, ""},
		{"public_key mode asked to issue without a private key", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = " + rsaPub + "\nissue = true\n", nil, "plugin.auth.issue"},
		{"public_key mode issuing with its private key", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = " + rsaPub + "\nissue = true\n", map[string]string{"JFAST_AUTH_PRIVATE_KEY": privatePEM(t, rsa1)}, ""},
		{"private_key that does not match public_key", head + "[plugin.auth]\nmode = \"public_key\"\npublic_key = " + rsaPub + "\nissue = true\n", map[string]string{"JFAST_AUTH_PRIVATE_KEY": privatePEM(t, rsa2)}, "plugin.auth.private_key"},
		{"jwks mode asked to issue", head + "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"https://issuer.test/jwks\"\nissue = true\n", nil, "plugin.auth.issue"},
		{"jwks_timeout of zero", head + "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"https://issuer.test/jwks\"\njwks_timeout = \"0s\"\n", nil, "plugin.auth.jwks_timeout"},
		{"breaker_cool_down of zero", head + "[plugin.auth]\nmode = \"jwks\"\njwks_url = \"https://issuer.test/jwks\"\nbreaker_cool_down = 0\n", nil, "plugin.auth.breaker_cool_down"},
		{"negative leeway", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\nleeway = \"-1s\"\n", nil, "plugin.auth.leeway"},
		{"access_ttl of zero", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\naccess_ttl = \"0s\"\n", nil, "plugin.auth.access_ttl"},
		{"unknown key", head + "[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\nleway = \"5s\"\n", nil, "plugin.auth.leway"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			es := configErrors(t, tc.toml, tc.env)
			if tc.key == "" {
				if len(es) > 0 {
					t.Fatalf("want no errors, got:\n%v", es)
				}
				return
			}
			if !hasKey(es, tc.key) {
				t.Fatalf("want an error on %s, got:\n%v", tc.key, es)
			}
		})
	}
}

// TestSecretsNeverInErrors: the secret and the private key are deploy keys that
// must not reach an error message.
func TestSecretsNeverInErrors(t *testing.T) {
	t.Parallel()
	testKeys(t)
	secret := "tooshort-but-secret"
	es := configErrors(t, "[app]\nenv = \"production\"\n[plugins]\nenabled = [\"auth\"]\n[plugin.auth]\nmode = \"hmac\"\n",
		map[string]string{"JFAST_AUTH_SECRET": secret})
	if !hasKey(es, "plugin.auth.secret") || strings.Contains(es.Error(), secret) {
		t.Fatalf("want an error on plugin.auth.secret that does not quote it, got:\n%v", es)
	}
	priv := privatePEM(t, rsa2)
	es = configErrors(t, "[plugins]\nenabled = [\"auth\"]\n[plugin.auth]\nmode = \"public_key\"\npublic_key = "+tomlString(publicPEM(t, &rsa1.PublicKey))+"\n",
		map[string]string{"JFAST_AUTH_PRIVATE_KEY": priv})
	body := strings.Split(priv, "\n")[1]
	if !hasKey(es, "plugin.auth.private_key") || strings.Contains(es.Error(), body) {
		t.Fatalf("want an error on plugin.auth.private_key that does not quote it, got:\n%v", es)
	}
}

// TestCheckRevocationNeedsAProvider: check_revocation without the cache
// plugin, which keeps revoked token IDs, is refused with the configuration.
func TestCheckRevocationNeedsAProvider(t *testing.T) {
	t.Parallel()
	e := configErrors(t, "[plugins]\nenabled = [\"auth\"]\n[plugin.auth]\nmode = \"hmac\"\nsecret = \"x\"\ncheck_revocation = true\n", nil).
		Only(t, "plugin.auth.check_revocation")
	if want := `plugin "cache" is not enabled; fix: add "cache" to [plugins] enabled, or set check_revocation = false`; !strings.Contains(e.Error(), want) {
		t.Fatalf("error %q, want it to say %q", e, want)
	}
}

// TestSecretFromEnvironment: secret is a deploy key, so JFAST_AUTH_SECRET wins
// over the file.
func TestSecretFromEnvironment(t *testing.T) {
	t.Parallel()
	clk := jfasttest.NewClock()
	a := auth.New()
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"auth\"]\n[plugin.auth]\nmode = \"hmac\"\nsecret = \"from-the-file\"\n",
		Plugins: []framework.Plugin{a},
		Routes:  routes,
		Clock:   clk,
		Env:     map[string]string{"JFAST_AUTH_SECRET": testSecret},
	})
	claims := claimsAt(clk.Now())
	if r := svc.Get(t, "/me", bearer(sign(t, "HS256", "", claims, []byte(testSecret)))...); r.Status != 200 {
		t.Fatalf("token signed with the environment's secret: status %d, body %s", r.Status, r.Body)
	}
	expect401(t, svc.Get(t, "/me", bearer(sign(t, "HS256", "", claims, []byte("from-the-file")))...), auth.ReasonSignature)
	if strings.Contains(svc.Logs(), testSecret) || strings.Contains(svc.Logs(), "from-the-file") {
		t.Fatalf("a secret reached the logs:\n%s", svc.Logs())
	}
}
