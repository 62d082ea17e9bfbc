package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/mail"
)

// mailRoutes mounts POST /welcome, which sends a welcome mail. Send validates the
// message and enqueues it: a queue job delivers it (over SMTP, or to the log with
// transport = "log"), so an SMTP server that is down never slows the request.
func mailRoutes(app *framework.App, r chi.Router) error {
	m, err := mail.From(app)
	if err != nil {
		return err
	}
	r.Method(http.MethodPost, "/welcome", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		var in struct {
			Email string `json:"email"`
		}
		if err := framework.DecodeJSON(r, &in); err != nil {
			return err // 415, 413, 400 or 422 problem+json, saying what is wrong
		}
		err := m.Send(r.Context(), mail.Message{
			To:      []string{in.Email},
			Subject: "Welcome to shop",
			Text:    "Thanks for signing up.",
		})
		if err != nil {
			return err // an invalid address is a 422; the queue unreachable, a 503 naming it
		}
		w.WriteHeader(http.StatusAccepted)
		return nil
	}))
	return nil
}
