package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/examples/internal/exampletest"
	"github.com/jfastframework/jfast/examples/orders/service"
	"github.com/jfastframework/jfast/framework/cli"
)

// runToken runs `orders token args...` with config as the configuration.
func runToken(t *testing.T, config string, args ...string) (string, string, int) {
	t.Helper()
	opts := service.Options()
	opts.ConfigText = config
	opts.Environ = []string{}
	root := cli.NewCommand(opts)
	root.AddCommand(tokenCommand(opts))
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), root, append([]string{"token"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestToken(t *testing.T) {
	t.Parallel()
	out, errOut, code := runToken(t, config, "bob")
	if code != 0 {
		t.Fatalf("token bob: exit %d: %s", code, errOut)
	}
	claims := jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(strings.TrimSpace(out), &claims, func(*jwt.Token) (any, error) {
		return []byte(exampletest.Secret), nil
	}, jwt.WithIssuer(exampletest.Issuer), jwt.WithAudience(exampletest.Audience), jwt.WithValidMethods([]string{"HS256"}))
	if err != nil || claims.Subject != "bob" || claims.ExpiresAt == nil {
		t.Fatalf("token %q: %v %+v", out, err, claims)
	}
}

func TestTokenRefusedInProduction(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("jfast.toml")
	if err != nil {
		t.Fatal(err)
	}
	production := strings.Replace(string(b), `env = "development"`, `env = "production"`+"\nadmin_listen = \"127.0.0.1:9000\"", 1)
	out, errOut, code := runToken(t, production)
	if code == 0 || out != "" || !strings.Contains(errOut, "refusing to issue a development token") {
		t.Fatalf("token in production: exit %d, out %q, err %q", code, out, errOut)
	}
}
