package auth_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
)

// Issuing and verifying in hmac mode: the secret comes from the environment (a
// deploy key), the rest from jfast.toml.
func ExamplePlugin_Issue() {
	a := auth.New()
	app, err := framework.New(framework.Options{
		Plugins: []framework.Plugin{a},
		ConfigText: `
[plugins]
enabled = ["auth"]
[plugin.auth]
mode = "hmac"
issue = true
issuer = "https://orders.example/"
audience = "orders"
access_ttl = "10m"
`,
		Environ:   []string{"JFAST_APP_LISTEN=127.0.0.1:0", "JFAST_AUTH_SECRET=an-example-secret-of-at-least-32-bytes"},
		LogOutput: io.Discard,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if err := app.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer app.Stop(ctx)

	token, err := a.Issue(ctx, auth.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: "user-7"},
		Scopes:           []string{"orders:read"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	claims, err := a.Verify(ctx, token)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(claims.Subject, claims.Scopes, claims.Issuer, claims.ExpiresAt.Sub(claims.IssuedAt.Time))
	// Output: user-7 [orders:read] https://orders.example/ 10m0s
}

// Protecting routes: any valid token for /me, a scope for writes, one of two
// roles for the back office.
func ExamplePlugin_RequireAuth() {
	routes := func(app *framework.App, r chi.Router) error {
		a, err := auth.From(app)
		if err != nil {
			return err // auth is not enabled: the boot fails naming the fix
		}
		me := framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			c, _ := auth.ClaimsFrom(r.Context())
			return framework.JSON(w, http.StatusOK, map[string]string{"sub": c.Subject})
		})
		r.With(a.RequireAuth()).Method(http.MethodGet, "/me", me)
		r.With(a.RequireAuth(auth.Scopes("orders:write"))).Method(http.MethodPost, "/orders", me)
		r.With(a.RequireAuth(auth.Roles("admin", "support"))).Method(http.MethodGet, "/backoffice", me)
		return nil
	}
	_ = framework.Options{Plugins: []framework.Plugin{auth.New()}, Routes: routes}
}
