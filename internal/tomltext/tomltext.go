// Package tomltext writes the pieces of TOML that jfast prints from config
// structs: keys, strings and values. The config command (the effective
// configuration) and jfast new (a commented jfast.toml) both use it.
package tomltext

import (
	"encoding"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// IsTable reports whether t is written as a TOML table: a struct that is not a
// time or a text value.
func IsTable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != reflect.TypeFor[time.Time]() && !reflect.PointerTo(t).Implements(textUnmarshaler)
}

// IsMapOfTables reports whether t is a map of named tables
// ([plugin.http.upstreams.<name>]).
func IsMapOfTables(t reflect.Type) bool {
	return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && IsTable(t.Elem())
}

// SortedKeys returns the keys of a string-keyed map value, sorted.
func SortedKeys(v reflect.Value) []string {
	keys := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	return keys
}

// Field is one key of a config struct: its name in jfast.toml, the struct
// field, the type that declares it (an embedded type for squashed fields, so
// its doc comment can be found) and its index path for FieldByIndex.
type Field struct {
	Name  string
	Field reflect.StructField
	Owner reflect.Type
	Index []int
}

// Fields lists the keys of struct type t in declaration order: a field's
// key is its koanf tag (or its lower-cased name), `koanf:"-"` is skipped and
// an embedded struct tagged `koanf:",squash"` contributes its own fields in
// its place, as if they were declared in t (resilience.BreakerConfig's
// breaker_* keys in every plugin's table).
func Fields(t reflect.Type) []Field {
	var out []Field
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
			if name == "-" {
				continue
			}
			index := append(append([]int(nil), prefix...), i)
			if f.Anonymous && name == "" && opts == "squash" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, index)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			out = append(out, Field{Name: name, Field: f, Owner: t, Index: index})
		}
	}
	walk(t, nil)
	return out
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// Key writes k bare when TOML allows it, quoted otherwise.
func Key(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return String(k)
}

// Path writes a dotted key path, quoting the parts that need it.
func Path(path string) string {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		parts[i] = Key(p)
	}
	return strings.Join(parts, ".")
}

// String quotes s as a TOML basic string.
func String(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Duration writes d the way a person would in jfast.toml: "30s", "2m",
// "1m30s", "250ms" (time.Duration.String without the trailing zero units).
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Value writes v as a TOML value. Text (strings, text values and anything
// printed with fmt) goes through text, which quotes it — and may mask it; pass
// String to write it as it is.
func Value(v reflect.Value, text func(string) string) string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return `""`
		}
		v = v.Elem()
	}
	if v.Type() == reflect.TypeFor[time.Duration]() {
		return String(Duration(time.Duration(v.Int())))
	}
	if v.CanInterface() {
		if m, ok := v.Interface().(encoding.TextMarshaler); ok && v.Kind() != reflect.String {
			if b, err := m.MarshalText(); err == nil {
				return text(string(b))
			}
		}
	}
	switch v.Kind() {
	case reflect.String:
		return text(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		s := strconv.FormatFloat(v.Float(), 'f', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s
	case reflect.Slice, reflect.Array:
		items := make([]string, v.Len())
		for i := range items {
			items[i] = Value(v.Index(i), text)
		}
		return "[" + strings.Join(items, ", ") + "]"
	default:
		return text(fmt.Sprint(v.Interface()))
	}
}
