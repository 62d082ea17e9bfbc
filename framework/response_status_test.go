package framework_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

// wrapper is a writer a middleware puts around the framework's recorder.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ResponseStatus finds the recorded status through the writers wrapping the
// recorder, and is 200 for a handler that wrote nothing and outside an App.
func TestResponseStatus(t *testing.T) {
	t.Parallel()
	got := make(chan [2]int, 1)
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/teapot", func(w http.ResponseWriter, _ *http.Request) {
			before := framework.ResponseStatus(wrapper{w})
			w.WriteHeader(http.StatusTeapot)
			got <- [2]int{before, framework.ResponseStatus(wrapper{wrapper{w}})}
		})
		return nil
	}})
	if resp := svc.Get(t, "/teapot"); resp.Status != http.StatusTeapot {
		t.Fatalf("GET /teapot = %d", resp.Status)
	}
	if g := <-got; g != [2]int{http.StatusOK, http.StatusTeapot} {
		t.Fatalf("ResponseStatus before and after WriteHeader(418) = %v, want [200 418]", g)
	}
	rec := httptest.NewRecorder()
	rec.WriteHeader(http.StatusNotFound)
	if s := framework.ResponseStatus(rec); s != http.StatusOK {
		t.Fatalf("ResponseStatus of a writer with no recorder = %d, want 200", s)
	}
}
