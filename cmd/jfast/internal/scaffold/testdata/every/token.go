package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/cli"
	"github.com/jfastframework/jfast/plugins/auth"
)

// tokenCommand is `shop token [subject]`: it prints a bearer token signed with
// [plugin.auth] secret, so that /me can be tried with curl. A real deployment gets
// its tokens from an identity provider: issue stays off in jfast.toml and only
// this command turns it on; it refuses to run with app.env = "production".
func tokenCommand(s *cli.Service) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token [subject]",
		Short: "Print a development bearer token (subject defaults to \"ada\")",
		Example: `  TOKEN=$(go run . token ada)
  curl -s -H "Authorization: Bearer $TOKEN" localhost:8100/me`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			subject := "ada"
			if len(args) == 1 {
				subject = args[0]
			}
			opts := s.Options()
			opts.LogOutput = io.Discard
			opts.Environ = append(os.Environ(), "JFAST_AUTH_ISSUE=true")
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
