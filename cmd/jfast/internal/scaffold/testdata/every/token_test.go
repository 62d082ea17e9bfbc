package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework/cli"
)

// TestTokenCommand runs `shop token bob` with jfast.toml and sends the token
// it prints to /me of a service started with the same file.
func TestTokenCommand(t *testing.T) {
	t.Parallel()
	svc := setup(t, nil)
	var out, errs bytes.Buffer
	root := cli.NewCommand(Options(), tokenCommand)
	if code := cli.Run(context.Background(), root, []string{"token", "bob", "--config", "jfast.toml"}, &out, &errs); code != 0 {
		t.Fatalf("token: exit %d: %s", code, errs.String())
	}
	token := strings.TrimSpace(out.String())
	resp := svc.Get(t, "/me", "Authorization", "Bearer "+token)
	if resp.Status != http.StatusOK || strings.TrimSpace(resp.String()) != `{"subject":"bob"}` {
		t.Fatalf("with the command's token: status %d: %s", resp.Status, resp)
	}
}
