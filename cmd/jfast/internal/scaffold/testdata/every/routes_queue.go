package main

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/problem"
)

// greetJob is the payload of a "greet" job.
type greetJob struct {
	Name string `json:"name"`
}

// greeted counts the greet jobs this process ran.
var greeted atomic.Int64

// queueRoutes registers the "greet" job handler and mounts POST /greetings, which
// enqueues one. Handlers are registered here, at boot, so that both "serve" (with
// [plugin.queue] workers = true) and the "worker" command run them.
func queueRoutes(app *framework.App, r chi.Router) error {
	q, err := queue.From(app)
	if err != nil {
		return err
	}
	if err := queue.Handle(q, "greet", func(ctx context.Context, j greetJob) error {
		app.Logger().InfoContext(ctx, "greeted", "name", j.Name)
		greeted.Add(1)
		return nil // an error retries the job with backoff; queue.Permanent(err) does not
	}); err != nil {
		return err
	}
	r.Method(http.MethodPost, "/greetings", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		var j greetJob
		if err := framework.DecodeJSON(r, &j); err != nil {
			return err // 415, 413, 400 or 422 problem+json, saying what is wrong
		}
		if j.Name == "" {
			return problem.Unprocessable("the greeting needs a name", problem.FieldError{Field: "name", Detail: "must not be empty"})
		}
		res, err := q.Enqueue(r.Context(), "greet", j)
		if err != nil {
			return err // the backend unreachable: a 503 naming "queue"
		}
		return framework.JSON(w, http.StatusAccepted, map[string]string{"job_id": res.ID})
	}))
	return nil
}
