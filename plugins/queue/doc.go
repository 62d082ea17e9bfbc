// Package queue is jfast's job queue plugin: handlers registered at boot by job
// kind, Enqueue (and EnqueueTx inside a PostgreSQL transaction) with typed
// payloads, at-least-once delivery, a job timeout, retries with full-jitter
// backoff, and a dead letter that can be listed, retried and emptied.
//
// Three backends sit behind the one API: "postgres" on River
// (github.com/riverqueue/river), sharing the db plugin's pool, "redis" on
// asynq (github.com/hibiken/asynq), sharing the cache plugin's client, and
// "rabbitmq" on github.com/rabbitmq/amqp091-go with its own connections
// ([plugin.queue.rabbitmq]). A backend
// implements [Backend] and passes the conformance suite in package queuetest.
//
// # Example
//
//	q := queue.New()
//	cli.Main(framework.Options{
//		Plugins: []framework.Plugin{db.New(), q},
//		Routes: func(app *framework.App, r chi.Router) error {
//			if err := queue.Handle(q, "send_receipt", func(ctx context.Context, rc Receipt) error {
//				return send(ctx, rc) // queue.Permanent(err) for a rejected address
//			}); err != nil {
//				return err
//			}
//			r.Method(http.MethodPost, "/orders", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//				_, err := q.Enqueue(r.Context(), "send_receipt", Receipt{Order: 42}) // 503 naming "queue" when down
//				return err
//			}))
//			return nil
//		},
//	})
//
// Enqueue accepts only declared kinds: those handled in this process and those
// listed in [plugin.queue] kinds (sent to another service's workers); a job
// whose worker has no handler for its kind fails its attempts and ends in the
// dead letter like any failing job.
//
// The request ID of the enqueuing request travels with the job and is restored
// in the handler's context; [Plugin.AddMetadataHooks] is the seam for trace
// context. See docs/queue.md for the model, the guarantees and the numbers.
package queue
