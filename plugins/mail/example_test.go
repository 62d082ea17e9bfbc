package mail_test

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/mail"
)

// Send from a handler: the message is validated (an invalid one is a 422) and
// enqueued; a queue worker delivers it. The handler never waits for SMTP.
func ExamplePlugin_Send() {
	routes := func(app *framework.App, r chi.Router) error {
		m, err := mail.From(app)
		if err != nil {
			return err // mail not enabled: the boot fails naming it
		}
		r.Method(http.MethodPost, "/password-reset", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			err := m.Send(r.Context(), mail.Message{
				To:      []string{r.FormValue("email")},
				Subject: "Reset your password",
				Text:    "Follow this link within an hour: ...",
				HTML:    "<p>Follow <a href=\"...\">this link</a> within an hour.</p>",
			})
			if err != nil {
				return err // 422 invalid address, 503 queue unavailable
			}
			w.WriteHeader(http.StatusAccepted)
			return nil
		}))
		return nil
	}
	_ = framework.Options{Plugins: []framework.Plugin{mail.New()}, Routes: routes}
}
