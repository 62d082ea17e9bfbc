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

// SetHijackedStatus records the status a handler wrote past the
// ResponseWriter, through the writers wrapping the recorder, and leaves a
// status already written alone.
func TestSetHijackedStatus(t *testing.T) {
	t.Parallel()
	got := make(chan int, 2)
	svc := jfasttest.Start(t, jfasttest.Options{Routes: func(_ *framework.App, r chi.Router) error {
		r.Get("/switched", func(w http.ResponseWriter, _ *http.Request) {
			framework.SetHijackedStatus(wrapper{w}, http.StatusSwitchingProtocols)
			got <- framework.ResponseStatus(w)
			w.WriteHeader(http.StatusNoContent) // what the client sees here: no hijack in this test
		})
		r.Get("/written", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			framework.SetHijackedStatus(wrapper{w}, http.StatusSwitchingProtocols)
			got <- framework.ResponseStatus(w)
		})
		return nil
	}})
	svc.Get(t, "/switched")
	if g := <-got; g != http.StatusSwitchingProtocols {
		t.Errorf("ResponseStatus after SetHijackedStatus(101) = %d, want 101", g)
	}
	svc.Get(t, "/written")
	if g := <-got; g != http.StatusTeapot {
		t.Errorf("ResponseStatus after WriteHeader(418) and SetHijackedStatus(101) = %d, want 418", g)
	}
	framework.SetHijackedStatus(httptest.NewRecorder(), http.StatusSwitchingProtocols) // no recorder: nothing
}
