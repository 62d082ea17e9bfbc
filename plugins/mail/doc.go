// Package mail is jfast's email plugin: [Plugin.Send] validates a message and
// enqueues it; a job of the queue plugin delivers it over SMTP (with
// github.com/wneessen/go-mail) or, in development, writes it to the log.
//
// Mail is never sent from a request: an SMTP server that is down costs job
// retries with backoff, not request latency, so there is no breaker. Failures
// are sorted by the server's reply: connection refused, timeouts and 4xx
// replies are retried by the queue; a 5xx reply (rejected recipient, bad
// sender) is not — retrying cannot change the answer, and insisting is how a
// sending domain gets flagged — and the job goes straight to the queue's dead
// letter with the reply, where it can be retried once the cause is fixed.
//
// # Configuration
//
//	[plugins]
//	enabled = ["db", "queue", "mail"]
//
//	[plugin.mail]
//	transport = "smtp"                # "log" (the default) writes mail to the log
//	host = "smtp.example.com"         # or JFAST_MAIL_HOST
//	port = 587
//	use_starttls = true
//	username = "apikey"               # JFAST_MAIL_USERNAME
//	from = "Shop <orders@example.com>"
//
// The password comes from JFAST_MAIL_PASSWORD. See [Config] and docs/mail.md.
//
// # Example
//
//	func routes(app *framework.App, r chi.Router) error {
//		m, err := mail.From(app)
//		if err != nil {
//			return err
//		}
//		r.Method(http.MethodPost, "/orders", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//			// ... store the order ...
//			return m.Send(r.Context(), mail.Message{
//				To:      []string{"ada@example.com"},
//				Subject: "Your order",
//				Text:    "Thanks!",
//				HTML:    "<p>Thanks!</p>",
//			})
//		}))
//		return nil
//	}
//
// An invalid message is an [*InvalidMessageError] at the call (a 422 problem),
// never a dead job. [Plugin.SendTx] enqueues inside a pgx transaction (queue
// backend postgres), so the mail exists only if the transaction commits.
package mail
