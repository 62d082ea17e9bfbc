package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
)

// tokenCommand prints a bearer token signed with [plugin.auth] secret, so the
// README's curl lines have one. A real deployment gets its tokens from an
// identity provider; this command refuses to run with app.env = "production".
func tokenCommand(opts framework.Options) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token [subject]",
		Short: "Print a development bearer token (subject defaults to \"ada\")",
		Example: `  TOKEN=$(go run ./examples/orders token ada)
  curl -s -H "Authorization: Bearer $TOKEN" localhost:8000/orders/1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			subject := "ada"
			if len(args) == 1 {
				subject = args[0]
			}
			if path, _ := cmd.Flags().GetString("config"); path != "" {
				opts.ConfigFile, opts.ConfigText = path, ""
			}
			opts.LogOutput = io.Discard
			app, err := framework.New(opts)
			if err != nil {
				return err
			}
			if app.Config().Production() {
				return errors.New("token: refusing to issue a development token with app.env = \"production\"")
			}
			a, err := auth.From(app)
			if err != nil {
				return err
			}
			// Only the auth plugin is started: issuing needs its key, nothing else.
			if err := a.Start(cmd.Context(), app); err != nil {
				return err
			}
			defer func() { _ = a.Stop(cmd.Context()) }()
			claims := auth.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: subject}}
			if ttl > 0 {
				claims.ExpiresAt = jwt.NewNumericDate(time.Now().Add(ttl))
			}
			token, err := a.Issue(cmd.Context(), claims)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), token)
			return err
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "lifetime of the token (default [plugin.auth] access_ttl)")
	return cmd
}
