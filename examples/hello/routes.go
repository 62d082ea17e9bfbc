package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/problem"
)

// Options is the service as main compiles it; tests start the same thing.
func Options() framework.Options {
	return framework.Options{Routes: Routes}
}

// Routes mounts GET /hello?name=.
func Routes(_ *framework.App, r chi.Router) error {
	r.Method(http.MethodGet, "/hello", framework.Handler(hello))
	return nil
}

type greeting struct {
	Message string `json:"message"`
}

func hello(w http.ResponseWriter, r *http.Request) error {
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "world"
	}
	if len(name) > 100 {
		return problem.Unprocessable("name is too long", problem.FieldError{Field: "name", Detail: "at most 100 characters"})
	}
	return framework.JSON(w, http.StatusOK, greeting{Message: "hello, " + name})
}
