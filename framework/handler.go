package framework

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/jfastframework/jfast/problem"
)

// HandlerFunc is a handler that may fail. Its error is rendered in one place:
// an error that is (or wraps) a problem renders as that problem, every plugin's
// dependency error as a 503 naming the dependency, anything else as a 500 problem
// with no internals (the error itself goes to the log with the request ID).
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP implements http.Handler.
func (f HandlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f(w, r); err != nil {
		WriteError(w, r, err)
	}
}

// Handler adapts a function returning an error to an http.Handler.
func Handler(f func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return HandlerFunc(f)
}

// WriteError renders err as problem+json. When the response has already
// started it can only be logged, and the response is then aborted
// (panic(http.ErrAbortHandler), which the framework's recovery passes on to
// net/http): ended normally, a body cut half-way would reach the client as a
// complete one (net/http would even give a short one its Content-Length).
// A response without a body (a HEAD's, a 204, a 304) and an event stream
// (text/event-stream), whose end claims no completeness and whose handler
// may have told the client in an event, are ended normally. A started
// response whose client went away is aborted the same way: what was sent is
// not a whole answer, whoever reads it.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	rec := recorderOf(w) // through the writers middleware wrapped it in
	log := rec.logger()
	var body *BodyReadError
	if clientLeft(r) && !errors.As(err, &body) {
		// Whatever failed, it failed because the client went away (its
		// context was cancelled): not the service's error, and nobody reads
		// the answer. A body that could not be read is answered as itself:
		// net/http cancels the context on any read error, a read deadline
		// included.
		log.LogAttrs(r.Context(), slog.LevelDebug, "client closed the request",
			slog.String("route", routePattern(r)), slog.String("error", err.Error()))
		if responseStarted(w) && mayBeCut(w, r, err) {
			// A response cut half-way by the client's leaving is aborted
			// as any other: nobody reads it, but the middleware around
			// the handler (the idempotency plugin's, which would store it
			// as a whole response for replay) learns it was not finished.
			panic(http.ErrAbortHandler)
		}
		clientGone(w, r)
		return
	}
	p := problem.From(err)
	if p.Status >= 500 {
		log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.Int("status", p.Status), slog.String("route", routePattern(r)), slog.String("error", err.Error()))
	}
	if responseStarted(w) {
		log.LogAttrs(r.Context(), slog.LevelError, "error after the response started; it cannot be rendered",
			slog.String("error", err.Error()))
		if mayBeCut(w, r, err) {
			panic(http.ErrAbortHandler)
		}
		return
	}
	problem.Write(w, r, p)
}

// responseStarted reports whether a status was written on w or on a writer
// it wraps (found through Unwrap): the framework's recorder, or a writer
// that holds the response before passing it on and says so with
// Started() bool (the idempotency plugin's).
func responseStarted(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *ResponseRecorder:
			return x.Started()
		case interface{ Started() bool }:
			if x.Started() {
				return true
			}
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// mayBeCut reports whether a started response that failed with err could
// reach the client as a whole one though cut: one that has a body
// (not a HEAD's, a 1xx, 204 or 304, nor one whose write net/http refused
// as not allowed) and is no event stream, whose end claims nothing.
func mayBeCut(w http.ResponseWriter, r *http.Request, err error) bool {
	switch status := ResponseStatus(w); {
	case r.Method == http.MethodHead, status < 200, status == http.StatusNoContent, status == http.StatusNotModified,
		errors.Is(err, http.ErrBodyNotAllowed):
		return false
	}
	return !isEventStream(w.Header().Get("Content-Type"))
}

// isEventStream reports whether the media type ct is text/event-stream.
func isEventStream(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// JSON writes v as a JSON response with the given status.
func JSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	return err
}

// RouteTemplate returns the chi route template that r was routed by
// ("/orders/{id}"), or "" when no route matched it. Middleware reads it
// once its next handler has returned, as metrics and spans name a request,
// with the writer it was given: a request no route matched under a
// sub-router (r.Route("/api", ...)) has chi's routing pattern say the
// mount's, "/api/*", where the framework's 404 or 405 marked it, on the
// [ResponseRecorder] found through w, as matching none. A route that is a
// catch-all of its own ("/files/*", a mounted handler that is not a chi
// router) keeps its template.
func RouteTemplate(w http.ResponseWriter, r *http.Request) string {
	if rec := recorderOf(w); rec != nil && rec.unrouted {
		return ""
	}
	return routePattern(r)
}

// markUnrouted marks the request served with w as matching no route (see
// RouteTemplate).
func markUnrouted(w http.ResponseWriter) {
	if rec := recorderOf(w); rec != nil {
		rec.unrouted = true
	}
}

func routePattern(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		return rctx.RoutePattern()
	}
	return ""
}

// logger returns the App's logger, or slog's default for a writer with no
// recorder (w nil: outside a jfast App).
func (w *ResponseRecorder) logger() *slog.Logger {
	if w == nil {
		return slog.Default()
	}
	return w.log
}
