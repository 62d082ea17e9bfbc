package main

import (
	"errors"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/problem"
)

// storageRoutes mounts PUT and GET /files/{name} on the "files" disk
// ([plugin.storage.disks.files] in jfast.toml). Keys are checked before any I/O:
// a traversal attempt is a 400, never a file outside the disk.
func storageRoutes(app *framework.App, r chi.Router) error {
	files, err := storage.For(app, "files")
	if err != nil {
		return err // no such disk: the boot fails naming it
	}
	// Uploads may be larger than app.max_body_bytes (1 MiB): this route reads up to 32 MiB.
	r.With(framework.MaxBodyBytes(32<<20)).Method(http.MethodPut, "/files/{name}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		key := "uploads/" + chi.URLParam(r, "name")
		if err := files.Put(r.Context(), key, storage.Sized(r.Body, r.ContentLength), r.Header.Get("Content-Type")); err != nil {
			return err // an outage is a 503 naming "storage"; a body over 32 MiB a 413
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	r.Method(http.MethodGet, "/files/{name}", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		obj, err := files.Get(r.Context(), "uploads/"+chi.URLParam(r, "name"))
		if errors.Is(err, storage.ErrNotExist) {
			return problem.NotFound("no such file")
		}
		if err != nil {
			return err
		}
		defer obj.Close()
		if obj.ContentType != "" {
			w.Header().Set("Content-Type", obj.ContentType)
		}
		_, err = io.Copy(w, obj)
		return err
	}))
	return nil
}
