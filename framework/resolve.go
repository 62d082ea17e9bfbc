package framework

import (
	"fmt"
	"strings"
)

// Resolver is a plugin with defaults that depend on other settings: the [app]
// table (a key prefix from app.name, a lease from app.request_timeout) or the
// process's environment (the OpenTelemetry variables). ResolveDefaults runs once,
// after the plugin's table is decoded and before Validate, and fills only what the
// file and the environment left unset. Validate then only reads, and the config
// command shows the values in force.
type Resolver interface {
	Plugin
	ResolveDefaults(r *Resolution)
}

// Resolution is what a plugin's ResolveDefaults sees: the [app] table, which of
// its keys the file or the environment set, and where to record how a value was
// computed. Keys are relative to the plugin's table.
type Resolution struct {
	prefix  string
	app     *AppConfig
	set     map[string]string
	sources map[string]Source
	notes   map[string]string
}

// App returns the [app] table as bound (not yet validated).
func (r *Resolution) App() AppConfig { return *r.app }

// IsSet reports whether the file or the environment set key.
func (r *Resolution) IsSet(key string) bool {
	_, ok := r.set[r.key(key)]
	return ok
}

// Source says where key's value came from: "file", "env JFAST_..." or "default".
func (r *Resolution) Source(key string) string {
	if s, ok := r.sources[r.key(key)]; ok {
		return s.String()
	}
	return "default"
}

// Computed records how key's value was computed, for the source column of the
// config command: `default: app.name + ":"`, or "env OTEL_EXPORTER_OTLP_ENDPOINT"
// for a value read from a variable of another convention.
func (r *Resolution) Computed(key, how string) { r.notes[r.key(key)] = how }

func (r *Resolution) key(key string) string { return r.prefix + "." + key }

// FromURL records that key's value was read from the parameter param of the
// connection string urlKey (a pool size in a database URL), for the source
// column of the config command: "url (plugin.db.url pool_max_conns)", or the
// variable's name when the environment set urlKey.
func (r *Resolution) FromURL(key, urlKey, param string) {
	where := r.key(urlKey)
	if src := r.Source(urlKey); strings.HasPrefix(src, "env ") {
		where = src
	}
	r.Computed(key, fmt.Sprintf("url (%s %s)", where, param))
}
