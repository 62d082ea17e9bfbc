package framework

import (
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jfastframework/jfast/internal/tomltext"
)

// WriteEffectiveConfig writes the configuration the App runs with as TOML: [app],
// [plugins] and the table of every enabled plugin, each key with its value and a
// trailing comment naming its source — "default", "file", "env JFAST_...", or how
// a plugin's [Resolver] computed it ("default: app.name + \":\"").
// Secrets are written as "***" (see [IsSecretKey]), and the password inside any
// URL's userinfo is masked too. The service's "config" command prints it.
func (a *App) WriteEffectiveConfig(w io.Writer) error {
	ew := &errWriter{w: w}
	src := func(key string) string {
		if how, ok := a.computed[key]; ok {
			return how // a Resolver's word wins: it may have replaced the file's value
		}
		if s, ok := a.raw.sources[key]; ok {
			return s.String()
		}
		return "default"
	}
	fmt.Fprintf(ew, "# The effective configuration of %q, from %s.\n", a.cfg.Name, a.ConfigName())
	fmt.Fprintln(ew, "# Each value's source is in its comment: default, file, or the environment variable.")

	tw := &tomlWriter{w: ew, source: src}
	tw.table("app", reflect.ValueOf(a.cfg), nil)

	plugins := PluginsConfig{Enabled: a.enabled}
	tw.table("plugins", reflect.ValueOf(plugins), nil)

	for _, name := range plugins.Enabled {
		p := a.compiled[name]
		if p == nil {
			continue
		}
		key := "plugin." + name
		crit := []tomlLine{{key: "critical", value: strconv.FormatBool(a.critical[name]), source: src(key + ".critical")}}
		cfg, ok := a.tables[name]
		if !ok {
			tw.table(key, reflect.Value{}, crit)
			continue
		}
		// The value bound and resolved at New: some plugins' Config resets to
		// the defaults, so it is not asked again.
		tw.table(key, reflectValue(cfg), crit)
	}
	return ew.err
}

// secretKeys are the last key segments whose values are secrets.
var secretKeys = map[string]bool{
	"password": true, "passwd": true, "pass": true, "secret": true, "secrets": true,
	"secret_key": true, "signing_key": true, "private_key": true, "token": true,
	"api_key": true, "apikey": true, "client_secret": true, "secret_access_key": true,
	"access_token": true, "refresh_token": true, "passphrase": true, "credentials": true,
	"hmac_secret": true, "session_token": true, "auth_token": true,
	// HTTP header names, as keys of a headers table (an upstream's configured
	// headers): the ones that carry credentials.
	"authorization": true, "proxy_authorization": true, "cookie": true,
}

// IsSecretKey reports whether a configuration key holds a secret, by its last
// segment, compared case-insensitively with "-" read as "_": password, secret,
// secret_key, signing_key, private_key, token, api_key, the credential-carrying
// HTTP headers (Authorization, Proxy-Authorization, Cookie, X-Api-Key), and names
// ending in _password, _secret, _token, _api_key, _private_key, _signing_key or
// _secret_key. The config command prints such values as "***".
func IsSecretKey(key string) bool {
	last := key[strings.LastIndexByte(key, '.')+1:]
	last = strings.ReplaceAll(strings.ToLower(last), "-", "_")
	if secretKeys[last] {
		return true
	}
	for _, suffix := range []string{"_password", "_secret", "_secrets", "_token", "_api_key", "_private_key", "_signing_key", "_secret_key"} {
		if strings.HasSuffix(last, suffix) {
			return true
		}
	}
	return false
}

var (
	dsnPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('[^']*'|\S+)`)
	// urlPassword is the password of a URL's userinfo: scheme://user:PASSWORD@.
	// A "/" or "@" inside a password must be percent-encoded, so neither ends
	// one early.
	urlPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@/\s]*@`)
)

// MaskSecrets masks the password in a URL's userinfo ("postgres://app:***@db/app")
// and in a key=value DSN ("password=***"), leaving the rest of s as written.
func MaskSecrets(s string) string {
	s = urlPassword.ReplaceAllString(s, "${1}***@")
	return dsnPassword.ReplaceAllString(s, "${1}***")
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

type tomlWriter struct {
	w      io.Writer
	source func(key string) string
}

type tomlLine struct{ key, value, source string }

// table writes [path] with the scalar fields of v (after the extra lines), then its
// nested tables.
func (t *tomlWriter) table(path string, v reflect.Value, extra []tomlLine) {
	lines := append([]tomlLine(nil), extra...)
	type sub struct {
		path string
		v    reflect.Value
	}
	var subs []sub
	var empties []string
	if v.IsValid() {
		typ := v.Type()
		switch typ.Kind() {
		case reflect.Struct:
			for _, f := range tomltext.Fields(typ) {
				name := f.Name
				key := path + "." + name
				fv := v.FieldByIndex(f.Index)
				switch {
				case tomltext.IsTable(fv.Type()):
					subs = append(subs, sub{key, fv})
				case tomltext.IsMapOfTables(fv.Type()):
					if fv.Len() == 0 {
						empties = append(empties, key)
					}
					for _, k := range tomltext.SortedKeys(fv) {
						subs = append(subs, sub{key + "." + k, fv.MapIndex(reflect.ValueOf(k))})
					}
				case fv.Kind() == reflect.Map:
					subs = append(subs, sub{key, fv})
				default:
					lines = append(lines, tomlLine{name, formatValue(key, fv), t.source(key)})
				}
			}
		case reflect.Map:
			for _, k := range tomltext.SortedKeys(v) {
				key := path + "." + k
				lines = append(lines, tomlLine{tomltext.Key(k), formatValue(key, v.MapIndex(reflect.ValueOf(k))), t.source(key)})
			}
		}
	}
	fmt.Fprintf(t.w, "\n[%s]\n", tomltext.Path(path))
	keyWidth, width := 0, 0
	for _, l := range lines {
		keyWidth = max(keyWidth, len(l.key))
	}
	for _, l := range lines {
		width = max(width, keyWidth+3+len(l.value))
	}
	for _, l := range lines {
		s := fmt.Sprintf("%-*s = %s", keyWidth, l.key, l.value)
		fmt.Fprintf(t.w, "%-*s  # %s\n", width, s, l.source)
	}
	for _, e := range empties {
		fmt.Fprintf(t.w, "# [%s.<name>]: none configured\n", tomltext.Path(e))
	}
	for _, s := range subs {
		t.table(s.path, s.v, nil)
	}
}

// formatValue renders v as a TOML value, masking secrets.
func formatValue(key string, v reflect.Value) string {
	secret := IsSecretKey(key)
	return tomltext.Value(v, func(s string) string { return maskString(s, secret) })
}

func maskString(s string, secret bool) string {
	if secret && s != "" {
		return `"***"`
	}
	return tomltext.String(MaskSecrets(s))
}

// FormatDuration writes d the way a person would in jfast.toml: "30s", "2m",
// "1m30s", "250ms" (time.Duration.String without the trailing zero units).
func FormatDuration(d time.Duration) string { return tomltext.Duration(d) }
