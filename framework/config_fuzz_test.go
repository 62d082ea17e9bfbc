package framework_test

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// secretMark is part of every secret FuzzConfigBinding writes: it must never
// come out of a boot error or the effective configuration.
const secretMark = "zq9SECRETzq9"

// FuzzConfigBinding boots from arbitrary TOML around a table with secrets and
// deploy keys, with arbitrary environment values: New never panics, a refusal
// is ConfigErrors whose every entry names a key, and neither the errors nor
// the effective configuration (the config command's output) ever quote a
// secret, whatever the document around it does.
func FuzzConfigBinding(f *testing.F) {
	for _, c := range []struct{ doc, secret, env string }{
		{"", "tok", "https://ops:pw@vault:8200"},
		{"[app]\nrequest_timeout = \"1s\"\n", "a b", "8200"},
		{"[plugin.vault]\nport = \"x\"\n", "\"quoted\"", ""},
		{"[plugin.vault.headers]\nX = 1\n", "x\ny", "not a url"},
		{"retries = \"three\"\n", "", "https://u:p@h"},
		{"[app\n", "s", "s"},
		{"[plugin.vault]\ntoken_value = \"dup\"\n", "dup", "x"},
		{"wait = 5\nport = 99999999999999999999\n", "'", "%zz"},
	} {
		f.Add(c.doc, c.secret, c.env)
	}
	f.Fuzz(func(t *testing.T, doc, secret, env string) {
		if strings.Contains(doc, secretMark) || strings.Contains(env, secretMark) {
			return
		}
		token, _ := json.Marshal(secret + secretMark) // a JSON string is a TOML basic string
		header, _ := json.Marshal(secretMark + secret)
		text := "[plugins]\nenabled = [\"vault\"]\n[plugin.vault]\ntoken_value = " + string(token) + "\n" +
			doc + "\n[plugin.vault.headers]\nAuthorization = " + string(header) + "\n"
		app, err := framework.New(framework.Options{
			Plugins:    []framework.Plugin{&vault{}},
			LogOutput:  io.Discard,
			ConfigText: text,
			Environ: []string{
				"JFAST_VAULT_URL=" + env,
				"JFAST_VAULT_HEADERS__X_PARTNER=" + secretMark + env,
			},
		})
		if err != nil {
			var ces framework.ConfigErrors
			if !errors.As(err, &ces) {
				t.Fatalf("New = %T %v, want ConfigErrors", err, err)
			}
			for _, ce := range ces {
				if ce.Key == "" {
					t.Fatalf("an error names no key: %+v", ce)
				}
			}
			if strings.Contains(err.Error(), secretMark) {
				t.Fatalf("a boot error quotes a secret:\n%s\n--- config:\n%s", err, text)
			}
			return
		}
		var out strings.Builder
		if err := app.WriteEffectiveConfig(&out); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), secretMark) {
			t.Fatalf("the effective configuration prints a secret:\n%s\n--- config:\n%s", out.String(), text)
		}
	})
}
