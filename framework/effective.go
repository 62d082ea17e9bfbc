package framework

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"

	"github.com/jfastframework/jfast/internal/tomltext"
)

// WriteEffectiveConfig writes the configuration the App runs with as TOML: [app],
// [plugins] and the table of every enabled plugin, each key with its value and a
// trailing comment naming its source — "default", "file", "env JFAST_...", or how
// a plugin's [Resolver] computed it ("default: app.name + \":\"").
// Secrets are written as "***" (the keys plugins declare with [SecretKeyer],
// and those [IsSecretKey] names), and every other value goes through
// [MaskSecrets] (the password of any URL, secret query parameters and
// password= pairs). The service's "config" command prints it.
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

	tw := &tomlWriter{w: ew, source: src, secret: a.IsSecret}
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

// ConditionalKeys is a configuration table some of whose keys apply only
// with some values of its others: a storage disk's S3 keys apply only with
// driver = "s3", and its validation refuses them on a local disk. The config
// command and the jfast.toml jfast new writes leave out the keys for which
// Applies is false, so what they print (secrets filled back in) is a
// configuration the validation accepts. key is the key's name in the table;
// the method has a value receiver, as a map's tables are not addressable.
type ConditionalKeys interface {
	Applies(key string) bool
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
	secret func(key string) bool
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
			ck, _ := v.Interface().(ConditionalKeys)
			for _, f := range tomltext.Fields(typ) {
				name := f.Name
				if ck != nil && !ck.Applies(name) {
					continue
				}
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
					lines = append(lines, tomlLine{name, t.formatValue(key, fv), t.source(key)})
				}
			}
		case reflect.Map:
			lines = t.mapLines(lines, path, "", v)
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

// mapLines appends a line per entry of m, the map at path, to lines: a
// nested map (what a dotted key, deployment.region = "eu", makes of a
// free-form table) as dotted keys under prefix, as the file wrote them.
func (t *tomlWriter) mapLines(lines []tomlLine, path, prefix string, m reflect.Value) []tomlLine {
	for _, k := range tomltext.SortedKeys(m) {
		key, v := path+"."+k, m.MapIndex(reflect.ValueOf(k))
		if v.Kind() == reflect.Interface {
			v = v.Elem()
		}
		if v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String {
			lines = t.mapLines(lines, key, prefix+tomltext.Key(k)+".", v)
			continue
		}
		lines = append(lines, tomlLine{prefix + tomltext.Key(k), t.formatValue(key, v), t.source(key)})
	}
	return lines
}

// formatValue renders v as a TOML value, masking secrets.
func (t *tomlWriter) formatValue(key string, v reflect.Value) string {
	secret := t.secret(key)
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
