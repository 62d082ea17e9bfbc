package storage_test

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// A service that takes uploads and hands out links. The disk is looked up once,
// at boot; a missing disk fails the boot. Errors are returned as they are: an
// outage renders as a 503 naming storage, a bad key as a 400, a body over the
// limit as a 413.
func Example() {
	routes := func(app *framework.App, r chi.Router) error {
		uploads, err := storage.For(app, "uploads")
		if err != nil {
			return err
		}
		r.Put("/files/{name}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			key := "files/" + chi.URLParam(r, "name")
			// Sized: the request says its length, so S3 gets one streamed
			// request instead of a multipart upload.
			body := storage.Sized(http.MaxBytesReader(w, r.Body, 100<<20), r.ContentLength)
			if err := uploads.Put(r.Context(), key, body, r.Header.Get("Content-Type")); err != nil {
				return err
			}
			w.WriteHeader(http.StatusCreated)
			return nil
		}).ServeHTTP)
		r.Get("/files/{name}/link", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
			key := "files/" + chi.URLParam(r, "name")
			ok, err := uploads.Exists(r.Context(), key)
			if err != nil {
				return err
			}
			if !ok {
				return problem.NotFound("no such file")
			}
			// Private disks have no permanent URL: links expire.
			u, err := uploads.TemporaryURL(r.Context(), key, 15*time.Minute)
			if err != nil {
				return err
			}
			return framework.JSON(w, http.StatusOK, map[string]string{"url": u})
		}).ServeHTTP)
		return nil
	}
	_ = framework.Options{Plugins: []framework.Plugin{storage.New()}, Routes: routes}
}
