package idempotency

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/cache"
)

// A handler that returns an error after it wrote part of its answer, which
// the middleware still holds: framework.WriteError knows the response
// started (captureWriter.Started) and aborts it, as without the
// middleware, instead of appending a problem to the held body that would
// go out, and be stored and replayed, as a whole 200. The key is released:
// a repeat runs the handler again.
func TestErrorAfterTheHeldResponseStartedAbortsIt(t *testing.T) {
	t.Parallel()
	prefix := "jfasttest:idempotency:started:" + suffix() + ":"
	t.Cleanup(func() { deletePrefix(t, prefix) })
	toml := "[app]\nname = \"idemtest\"\n[plugins]\nenabled = [\"cache\", \"idempotency\"]\n" +
		fmt.Sprintf("[plugin.idempotency]\nstore = \"redis\"\nkey_prefix = %q\nscope = \"global\"\n", prefix)
	var runs atomic.Int64
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    toml,
		Plugins: []framework.Plugin{cache.New(), New()},
		Env:     map[string]string{"JFAST_CACHE_URL": "redis://" + sharedRedis + "/0"},
		Routes: func(app *framework.App, r chi.Router) error {
			idem, err := From(app)
			if err != nil {
				return err
			}
			r.With(idem.Middleware(Opts{})).Method(http.MethodPost, "/export", framework.Handler(func(w http.ResponseWriter, _ *http.Request) error {
				runs.Add(1)
				w.Header().Set("Content-Type", "text/csv")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "id,name\n1,a\n")
				return errors.New("the database went away half-way")
			}))
			return nil
		},
	})
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, svc.URL+"/export", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderKey, "export-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			continue // aborted
		}
		body, rerr := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if rerr == nil {
			t.Errorf("request %d: the client read a whole %d %q; want the response aborted", i+1, res.StatusCode, body)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2: an aborted response releases its key", n)
	}
}
