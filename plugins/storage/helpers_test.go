package storage_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/storage"
)

const testSigningKey = "0123456789abcdef0123456789abcdef-test"

// setup is what a storage test needs: a started service and its disk.
type setup struct {
	svc   *jfasttest.Service
	disk  *storage.Disk
	clock *resilience.TestClock
}

// start boots a service with the storage plugin and the given [plugin.storage]
// TOML, and returns the disk called name. routes, when not nil, mounts extra
// routes with the disk.
func start(t testing.TB, toml, name string, routes func(d *storage.Disk, r chi.Router)) setup {
	t.Helper()
	clk := jfasttest.NewClock()
	var disk *storage.Disk
	svc := jfasttest.Start(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"storage\"]\n" + toml,
		Plugins: []framework.Plugin{storage.New()},
		Clock:   clk,
		Routes: func(app *framework.App, r chi.Router) error {
			d, err := storage.For(app, name)
			if err != nil {
				return err
			}
			disk = d
			if routes != nil {
				routes(d, r)
			}
			return nil
		},
	})
	return setup{svc: svc, disk: disk, clock: clk}
}

func localTOML(root string, extra ...string) string {
	return fmt.Sprintf("[plugin.storage.disks.files]\ndriver = \"local\"\nroot = %q\nsigning_key = %q\n%s\n",
		root, testSigningKey, strings.Join(extra, "\n"))
}

// bootErrors builds an App from the TOML and returns its configuration errors.
func bootErrors(t *testing.T, toml string, env map[string]string) jfasttest.Errors {
	t.Helper()
	return jfasttest.ConfigErrors(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"storage\"]\n" + toml,
		Plugins: []framework.Plugin{storage.New()},
		Env:     env,
	})
}

func errorFor(errs jfasttest.Errors, key string) (framework.ConfigError, bool) { return errs.For(key) }

func newApp(t *testing.T, toml string, routes func(*framework.App, chi.Router) error) (*framework.App, error) {
	t.Helper()
	return jfasttest.New(t, jfasttest.Options{
		TOML:    "[plugins]\nenabled = [\"storage\"]\n" + toml,
		Plugins: []framework.Plugin{storage.New()},
		Routes:  routes,
	})
}

type chiRouter = chi.Router

// handlerGet serves GET /files/{key} from the disk.
func handlerGet(d *storage.Disk) http.HandlerFunc {
	return framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
		obj, err := d.Get(r.Context(), chi.URLParam(r, "key"))
		if err != nil {
			return err
		}
		defer obj.Close()
		w.Header().Set("Content-Type", obj.ContentType)
		_, err = io.Copy(w, obj)
		return err
	}).ServeHTTP
}
