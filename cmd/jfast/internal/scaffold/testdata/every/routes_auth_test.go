package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/plugins/auth"
)

func TestMe(t *testing.T) {
	t.Parallel()
	// issue is off in jfast.toml: the test turns it on to mint a token.
	svc := setup(t, map[string]string{"JFAST_AUTH_ISSUE": "true"})
	if resp := svc.Get(t, "/me"); resp.Status != http.StatusUnauthorized {
		t.Fatalf("without a token: status %d: %s", resp.Status, resp)
	}
	a, err := auth.From(svc.App)
	if err != nil {
		t.Fatal(err)
	}
	var claims auth.Claims
	claims.Subject = "alice"
	token, err := a.Issue(context.Background(), claims)
	if err != nil {
		t.Fatal(err)
	}
	resp := svc.Get(t, "/me", "Authorization", "Bearer "+token)
	if resp.Status != http.StatusOK || strings.TrimSpace(resp.String()) != `{"subject":"alice"}` {
		t.Fatalf("with a token: status %d: %s", resp.Status, resp)
	}
}
