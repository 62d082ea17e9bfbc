package framework

import (
	"encoding"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/jfastframework/jfast/internal/roster"
	"github.com/jfastframework/jfast/internal/tomltext"
)

// Defaulter is implemented by the element type of a map of tables (for example one
// upstream of [plugin.http.upstreams.<name>]) so each new entry starts from its
// defaults before the file and the environment are applied.
type Defaulter interface {
	SetDefaults()
}

// binder walks a typed config struct alongside the raw tree: it reports unknown keys
// (with a suggestion), values of the wrong type (with the full key), and records
// which keys were set. Leaf conversion is mapstructure's, with jfast's duration rule.
type binder struct {
	errs *ConfigErrors
	set  map[string]string
	// quiet reports whether a key's value must not be quoted in an error
	// (deploy keys and secrets); nil quotes every value.
	quiet func(key string) bool
	// sources says where each flat key came from, so a key the environment
	// set is reported by its variable's name.
	sources map[string]Source
	// declared and created are the raw configuration's (see [rawConfig]):
	// what the file writes, and the entries the environment alone created.
	declared map[string]bool
	created  map[string][]string
}

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	defaulterType       = reflect.TypeFor[Defaulter]()
)

func (b *binder) errorf(key, fix, format string, args ...any) {
	*b.errs = append(*b.errs, ConfigError{Key: key, Problem: fmt.Sprintf(format, args...), Fix: fix})
}

// fieldsOf maps each key of a struct type to its field's index path (squashed
// embedded structs contribute their own keys).
func fieldsOf(t reflect.Type) map[string][]int {
	fields := map[string][]int{}
	for _, f := range tomltext.Fields(t) {
		fields[f.Name] = f.Index
	}
	return fields
}

func (b *binder) bindStruct(path string, dst reflect.Value, src map[string]any) {
	fields := fieldsOf(dst.Type())
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var unknown []string
	for _, k := range keys {
		i, ok := fields[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		b.bindValue(join(path, k), dst.FieldByIndex(i), src[k])
	}
	// Unknown keys are reported once the table is bound: whether a renamed
	// key's new name applies can depend on the table's other keys (a disk's
	// driver).
	ck, _ := dst.Interface().(ConditionalKeys)
	for _, k := range unknown {
		b.unknown(join(path, k), k, slices.Collect(maps.Keys(fields)), ck)
	}
}

// renamedKeys are the policy keys jfast renamed, by their old name. A file
// or a variable that still writes one is refused at boot with the new name
// and how to convert the value: an old key is never read as an alias, so a
// table says each thing one way.
var renamedKeys = map[string]struct{ to, how string }{
	"retries":       {"attempts", "attempts counts every try, the first included: retries = 2 is attempts = 3, retries = 0 is attempts = 1"},
	"total_timeout": {"timeout", "the same bound of the whole call, every attempt and wait included"},
	"max_attempts":  {"attempts", "the same count: every try, the first included"},
}

// renamed reports the problem and fix of name, a key of a table whose keys
// are known, when jfast renamed it; ok is false otherwise. The old name is
// found in any case, as a did-you-mean is. When the new key does not apply
// to the table as configured (attempts on a local disk), the fix is to
// remove the old one, with the table's reason when it gives one
// ([KeyReasons]).
func renamed(name string, known []string, applies func(string) bool, why func(string) string, remove string, newName func(string) string) (problem, fix string, ok bool) {
	r, found := renamedKeys[strings.ToLower(name)]
	if !found || !slices.Contains(known, r.to) {
		return "", "", false
	}
	if !applies(r.to) {
		fix = remove
		if reason := why(r.to); reason != "" {
			fix += ": " + reason
		}
		return fmt.Sprintf("was renamed to %q, which does not apply here either", r.to), fix, true
	}
	return fmt.Sprintf("was renamed to %q", r.to), fmt.Sprintf("write %s instead (%s)", newName(r.to), r.how), true
}

// KeyReasons is a [ConditionalKeys] table that says why a key does not
// apply to it as configured ("a local disk does not retry"), for the fix of
// an old key renamed to that key. WhyNot returns "" when it has no reason
// to give.
type KeyReasons interface {
	ConditionalKeys
	WhyNot(key string) string
}

// unknown reports key, whose name is none of the known keys of its table;
// table is the table as bound when its keys apply conditionally, or nil.
func (b *binder) unknown(key, name string, known []string, table ConditionalKeys) {
	parent := strings.TrimSuffix(key, "."+name)
	applies := func(string) bool { return true }
	why := func(string) string { return "" }
	if table != nil {
		applies = table.Applies
	}
	if kr, ok := table.(KeyReasons); ok {
		why = kr.WhyNot
	}
	if strings.Contains(name, quotedDot) {
		// Quoted, "a.b" is one key: no table has such a key, and the
		// table the parts name is not where it goes.
		whole := strings.ReplaceAll(name, quotedDot, ".")
		if s := suggest(strings.ReplaceAll(whole, ".", "_"), known); s != "" {
			// "read.timeout" for read_timeout.
			b.errorf(key, fmt.Sprintf("did you mean %q?", s), "unknown key: with its quotes, %q is one key, and no key has \".\" in its name", whole)
			return
		}
		b.errorf(key, fmt.Sprintf("remove it, or write %s without quotes for the key %q of the table %q", whole, whole[strings.LastIndexByte(whole, '.')+1:], whole[:strings.LastIndexByte(whole, '.')]),
			"unknown key: with its quotes, %q is one key, and no key has \".\" in its name", whole)
		return
	}
	if vars := envOnly(b.sources, key); len(vars) > 0 {
		if problem, fix, ok := renamed(name, known, applies, why, "remove the variable", func(k string) string { return envName(join(parent, k)) }); ok {
			// The error's key is the variable: the problem does not name it again.
			b.errorf(strings.Join(vars, ", "), fix, "%s", problem)
			return
		}
		// No file holds this key: name what the user wrote, and what it
		// could have been, as variables too.
		fix := "remove the variable"
		if s := suggest(name, known); s != "" {
			fix = fmt.Sprintf("did you mean %s?", envName(join(parent, s)))
		} else if len(known) > 0 {
			names := make([]string, 0, len(known))
			for _, k := range slices.Sorted(slices.Values(known)) {
				names = append(names, envName(join(parent, k)))
			}
			fix = "remove the variable; known variables here: " + strings.Join(names, ", ")
		}
		b.errorf(strings.Join(vars, ", "), fix, "%s has no key %q", parent, name)
		return
	}
	if problem, fix, ok := renamed(name, known, applies, why, "remove it", func(k string) string { return k }); ok {
		b.errorf(key, fix, "%s", problem)
		return
	}
	fix := "remove it"
	if s := suggest(name, known); s != "" {
		fix = fmt.Sprintf("did you mean %q?", s)
	} else if len(known) > 0 {
		fix = "remove it; known keys here: " + strings.Join(slices.Sorted(slices.Values(known)), ", ")
	}
	b.errorf(key, fix, "unknown key")
}

// envOnly returns the variables that set key or keys under it when the
// environment alone set them, or nil when the file sets any of them.
func envOnly(sources map[string]Source, key string) []string {
	var vars []string
	for k, src := range sources {
		if k != key && !strings.HasPrefix(k, key+".") {
			continue
		}
		if src.Kind != "env" {
			return nil
		}
		vars = append(vars, src.EnvVar)
	}
	sort.Strings(vars)
	return vars
}

// envName is the JFAST_* variable of a flat key: the inverse of envKey.
func envName(key string) string {
	section, k, _ := strings.Cut(strings.TrimPrefix(key, "plugin."), ".")
	return envPrefix + strings.ToUpper(section) + "_" + strings.ToUpper(strings.ReplaceAll(k, ".", "__"))
}

// describe is how an error names val: quoted, or only by its kind when key
// is quiet.
func (b *binder) describe(key string, val any) string {
	if b.quiet != nil && b.quiet(key) {
		return kindOf(val) + " (not shown: " + key + " is a deploy key or a secret)"
	}
	return describe(val)
}

func (b *binder) bindValue(key string, dst reflect.Value, val any) {
	b.set[key] = ""
	t := dst.Type()
	switch {
	case t == durationType:
		d, err := parseDuration(val)
		if err != nil {
			msg := err.Error()
			if b.quiet != nil && b.quiet(key) {
				msg = "is not a duration: " + b.describe(key, val)
			}
			b.errorf(key, `write a duration such as "250ms" or "5s", or a number of seconds`, "%s", msg)
			return
		}
		dst.SetInt(int64(d))
	case t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textUnmarshalerType):
		m, ok := val.(map[string]any)
		if !ok {
			b.errorf(key, "write it as a table: ["+key+"]", "must be a table, got %s", b.describe(key, val))
			return
		}
		b.bindStruct(key, dst, m)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && val != nil:
		m, ok := val.(map[string]any)
		if !ok {
			b.errorf(key, "write it as a table: ["+key+"]", "must be a table, got %s", b.describe(key, val))
			return
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeMap(t))
		}
		var refused map[string]bool
		named := t.Elem().Kind() == reflect.Struct
		if named {
			refused = b.nearMisses(key, dst, m)
		} else {
			// Keys that are not names (a header, a resource attribute)
			// may have "." in them, quoted: the key is read as written.
			m = b.restoreDots(key, m)
		}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			if refused[name] {
				continue
			}
			full := join(key, name)
			elem := reflect.New(t.Elem())
			existing := dst.MapIndex(reflect.ValueOf(name))
			if existing.IsValid() {
				elem.Elem().Set(existing)
			} else if named && reflect.PointerTo(t.Elem()).Implements(defaulterType) {
				elem.Interface().(Defaulter).SetDefaults()
			}
			if named && strings.Contains(name, quotedDot) {
				// A quoted name with "." is no name: the entry is kept
				// apart for the plugin to refuse its name (see Unread). Its
				// keys are read, so a plugin that checks them finds what the
				// file wrote, but their own errors are not reported: the
				// table as a whole is refused ("up1.headers" holds a header,
				// not an upstream's key).
				quiet := *b
				quiet.errs = &ConfigErrors{}
				quiet.bindValue(full, elem.Elem(), m[name])
			} else {
				b.bindValue(full, elem.Elem(), m[name])
			}
			if _, created := b.created[full]; created && !existing.IsValid() && !b.setUnder(full) {
				// Every variable that would create the entry was refused
				// (an old or unknown key): it is not created, so no error
				// about what it lacks follows the one about its variable.
				delete(b.created, full)
				continue
			}
			dst.SetMapIndex(reflect.ValueOf(name), elem.Elem())
		}
	default:
		if b.sources[key].Kind == "file" && fileTypeMismatch(t, val) {
			problem := fmt.Sprintf("must be %s, got %s", describeKind(t), b.describe(key, val))
			if list, ok := val.([]any); ok && t.Kind() == reflect.Slice {
				for _, e := range list {
					if fileTypeMismatch(t.Elem(), e) {
						problem = fmt.Sprintf("each entry must be %s, got %s", describeKind(t.Elem()), b.describe(key, e))
						break
					}
				}
			}
			b.errorf(key, "write a "+describeType(t), "%s", problem)
			return
		}
		dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
			Result:           dst.Addr().Interface(),
			WeaklyTypedInput: true,
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				listFromString,
				mapstructure.TextUnmarshallerHookFunc(),
			),
		})
		if err == nil {
			err = dec.Decode(val)
		}
		if err != nil {
			if b.quiet != nil && b.quiet(key) {
				// mapstructure's message quotes the value.
				b.errorf(key, "write a "+describeType(t), "must be %s, got %s", describeKind(t), b.describe(key, val))
				return
			}
			b.errorf(key, "write a "+describeType(t), "must be %s, got %s", describeKind(t), describe(val))
		}
	}
}

// fileTypeMismatch reports whether val, a value the file gave for one of
// type t, is of another TOML type. The environment's values are text, read
// as the type needs ("3", "true", "a,b" for a list), but the file's carry
// TOML's own types, and one of the wrong type is a mistake, not a spelling:
// max_concurrent = true would otherwise read as 1, attempts = 2.5 as 2.
func fileTypeMismatch(t reflect.Type, val any) bool {
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return false // read from text, as its type says
	}
	switch t.Kind() {
	case reflect.Bool:
		_, ok := val.(bool)
		return !ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch val.(type) {
		case int64, int:
			return false
		}
		return true
	case reflect.Float32, reflect.Float64:
		switch val.(type) {
		case int64, int, float64:
			return false
		}
		return true
	case reflect.String:
		_, ok := val.(string)
		return !ok
	case reflect.Slice:
		list, ok := val.([]any)
		if !ok {
			return true
		}
		for _, e := range list {
			if fileTypeMismatch(t.Elem(), e) {
				return true
			}
		}
	}
	return false
}

// setUnder reports whether a key below key was bound.
func (b *binder) setUnder(key string) bool {
	for k := range b.set {
		if strings.HasPrefix(k, key+".") {
			return true
		}
	}
	return false
}

// restoreDots gives back their "." to the quoted keys of m, a table at key
// whose keys are not names, and to the keys of the tables in its values;
// the sources of their values follow them.
func (b *binder) restoreDots(key string, m map[string]any) map[string]any {
	found := false
	for k, v := range m {
		if _, isTable := v.(map[string]any); isTable || strings.Contains(k, quotedDot) {
			found = true
		}
	}
	if !found {
		return m
	}
	prefix := key + "."
	for k, src := range b.sources {
		if strings.HasPrefix(k, prefix) && strings.Contains(k, quotedDot) {
			delete(b.sources, k)
			b.sources[strings.ReplaceAll(k, quotedDot, ".")] = src
		}
	}
	return restoreDots(m).(map[string]any)
}

// nearMisses records the entries of the table of tables at key (upstreams,
// disks, queues) that the environment alone created, and refuses each one
// whose name is within the did-you-mean distance of [suggest] of an entry
// the table has otherwise (the file declares it, or it is a default): a
// misspelt entry name in a variable would create a second entry nothing
// uses while the intended one keeps the file's value. A refused entry is
// not bound, so no error derived from it (its missing keys, a second disk
// needing a default) follows. An entry named unlike every other one is
// created as the variables say.
func (b *binder) nearMisses(key string, dst reflect.Value, m map[string]any) map[string]bool {
	var have, created []string
	for _, k := range dst.MapKeys() {
		have = append(have, k.String())
	}
	for name := range m {
		full := join(key, name)
		switch {
		case slices.Contains(have, name):
		case strings.Contains(name, quotedDot):
			// Refused by its name: no variable should be steered to it.
		case b.declared[full]:
			have = append(have, name)
		case len(envOnly(b.sources, full)) > 0:
			created = append(created, name)
		}
	}
	refused := map[string]bool{}
	for _, name := range slices.Sorted(slices.Values(created)) {
		full := join(key, name)
		vars := envOnly(b.sources, full)
		if b.created != nil {
			b.created[full] = vars
		}
		near := suggest(name, have)
		if near == "" {
			continue
		}
		refused[name] = true
		meant := make([]string, len(vars))
		for i, v := range vars {
			meant[i] = envName(join(key, near) + strings.TrimPrefix(envKey(v), full))
		}
		b.errorf(strings.Join(vars, ", "),
			fmt.Sprintf("did you mean %s? (to add the entry %q on purpose, declare [%s] in the file, or give it a name unlike %q)", strings.Join(meant, ", "), name, full, near),
			"would create %s, which the file does not have, and %q is %s from %q", full, name, edits(name, near), near)
	}
	return refused
}

// listFromString splits a string given for a list (the environment's
// JFAST_APP_ADMIN_HOSTS="a.internal, b.internal") on its commas and trims
// the spaces around each element: "a,b" and "a, b" are one list, where a
// space kept would make " b" a host, an origin or a plugin name that
// nothing matches. An empty string is the empty list.
func listFromString(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	s := reflect.ValueOf(data).String()
	if s == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts, nil
}

// parseDuration accepts a Go duration string ("250ms", "5s") or a bare number of
// seconds (5, 0.25, "5").
func parseDuration(val any) (time.Duration, error) {
	switch v := val.(type) {
	case int64:
		return wholeSeconds(v)
	case int:
		return wholeSeconds(int64(v))
	case float64:
		return seconds(v, strconv.FormatFloat(v, 'g', -1, 64))
	case string:
		s := strings.TrimSpace(v)
		if s == "" {
			return 0, fmt.Errorf("is empty; a deadline must be set")
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return seconds(f, s)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration", s)
		}
		return d, nil
	default:
		return 0, fmt.Errorf("%s is not a duration", describe(val))
	}
}

// A time.Duration holds at most 2^63-1 ns (about 292 years): a bare number of
// seconds beyond it would wrap around into a short or negative duration.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// wholeSeconds converts a whole number of seconds to a duration, exactly.
func wholeSeconds(n int64) (time.Duration, error) {
	if n > maxSeconds || n < -maxSeconds {
		return 0, secondsOutOfRange(strconv.FormatInt(n, 10))
	}
	return time.Duration(n) * time.Second, nil
}

// seconds converts a number of seconds, written as text, to a duration.
// "inf" and "nan", which ParseFloat reads as numbers, are no durations.
func seconds(f float64, text string) (time.Duration, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a duration", text)
	}
	ns := f * float64(time.Second)
	if ns >= 1<<63 || ns <= -1<<63 {
		return 0, secondsOutOfRange(text)
	}
	return time.Duration(ns), nil
}

func secondsOutOfRange(text string) error {
	return fmt.Errorf("%s seconds is out of range: a duration holds at most %d seconds (about 292 years)", text, maxSeconds)
}

// describeKind names what a value of type t is, for "must be ..." (no Go
// type names: the reader wrote TOML).
func describeKind(t reflect.Type) string {
	if s := scalarKind(t.Kind()); s != "" {
		return s
	}
	if t.Kind() == reflect.Slice {
		return "a list"
	}
	return "a " + describeType(t)
}

// scalarKind names a value of kind k for a reader who knows TOML or JSON
// but no Go: the same words for both, or "" for a kind that is not a
// string, a boolean or a number.
func scalarKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return ""
}

func describe(val any) string {
	switch v := val.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "a table"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("%v", v)
	}
}

// kindOf names val's kind without its value.
func kindOf(val any) string {
	switch val.(type) {
	case string:
		return "a string"
	case map[string]any:
		return "a table"
	case []any:
		return "a list"
	case bool:
		return "a boolean"
	case int, int64, float64:
		return "a number"
	default:
		return fmt.Sprintf("a %T", val)
	}
}

func describeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean: true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list such as [\"a\", \"b\"] (or a comma-separated string in the environment)"
	default:
		return "string"
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest returns the known name closest to name within edit distance 2, or "".
func suggest(name string, known []string) string {
	best, bestD := "", 3
	sort.Strings(known)
	for _, k := range known {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// edits says how far name is from near, a name [suggest] returned for it:
// "one edit" or "two edits".
func edits(name, near string) string {
	if editDistance(name, near) > 1 {
		return "two edits"
	}
	return "one edit"
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func reflectValue(ptr any) reflect.Value {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("framework: Config() must return a pointer to a struct, got %T", ptr))
	}
	return v.Elem()
}

// isDeploy reports whether a flat key is a deploy key.
func (a *App) isDeploy(key string) bool {
	if key == "app.listen" || key == "app.admin_listen" || key == "app.admin_token" || key == "app.admin_hosts" {
		return true
	}
	return a.declares(key, deployKeys, matchKey)
}

// pluginTablesInPlugins reports a plugin's table written under [plugins]
// ([plugins.http], one s too many), which holds the list alone, with the
// table's right name, and returns m without them, for the list's binding.
func (a *App) pluginTablesInPlugins(m map[string]any, errs *ConfigErrors) map[string]any {
	var out map[string]any
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if _, isTable := m[name].(map[string]any); !isTable || a.compiled[name] == nil {
			continue
		}
		*errs = append(*errs, ConfigError{Key: "plugins." + name,
			Problem: "is in [plugins], which holds the list of enabled plugins alone",
			Fix:     fmt.Sprintf("write the plugin's table as [plugin.%s] (without an s)", name)})
		if out == nil {
			out = maps.Clone(m)
		}
		delete(out, name)
	}
	if out == nil {
		return m
	}
	return out
}

// bind decodes the raw tree into the [app] table, the [plugins] table and every
// compiled plugin's table, validates them, and orders the enabled plugins.
func (a *App) bind(errs *ConfigErrors) {
	b := &binder{errs: errs, set: map[string]string{}, quiet: a.quiet, sources: a.raw.sources, declared: a.raw.declared, created: a.raw.created}
	tree := a.raw.tree
	top := map[string]int{"app": 0, "plugins": 1, "plugin": 2}
	for _, k := range slices.Sorted(maps.Keys(tree)) {
		if _, ok := top[k]; !ok {
			b.unknown(k, k, slices.Collect(maps.Keys(top)), nil)
		}
	}
	if m, ok := tableAt(b, tree, "app"); ok {
		b.bindStruct("app", reflectValue(&a.cfg), m)
	}
	plugins := PluginsConfig{Enabled: []string{observabilityName}}
	if m, ok := tableAt(b, tree, "plugins"); ok {
		b.bindStruct("plugins", reflectValue(&plugins), a.pluginTablesInPlugins(m, errs))
	}
	v := &Validation{prefix: "app", app: &a.cfg, errs: errs, set: b.set}
	a.cfg.validate(v)

	enabled := a.enabledSet(plugins.Enabled, errs)

	pluginTables, _ := tableAt(b, tree, "plugin")
	a.uncompiledTables(pluginTables, errs)
	// Every table is bound, and every enabled plugin's defaults resolved,
	// before any plugin validates: Validation.RequirePlugin asks the plugin a
	// rule runs on (a Provider) about its table, whichever name sorts first.
	// A table's binding errors are still reported just before its
	// validation's, as one plugin's errors.
	names := slices.Sorted(maps.Keys(a.compiled))
	bindErrs := map[string]*ConfigErrors{}
	for _, name := range names {
		pb := *b
		pb.errs = &ConfigErrors{}
		bindErrs[name] = pb.errs
		a.bindPlugin(&pb, name, pluginTables)
		if rp, ok := a.compiled[name].(Resolver); ok && enabled[name] {
			rp.ResolveDefaults(&Resolution{prefix: "plugin." + name, app: &a.cfg, set: b.set, sources: a.raw.sources, notes: a.computed})
		}
	}
	var listens []listenAddr
	for _, name := range names {
		*errs = append(*errs, *bindErrs[name]...)
		if !enabled[name] {
			continue
		}
		if vp, ok := a.compiled[name].(Validator); ok {
			pv := &Validation{prefix: "plugin." + name, app: &a.cfg, errs: errs, set: b.set, critical: a.critical[name], enabled: enabled, compiled: a.compiled, listens: &listens}
			if a.opts.StandIn {
				pv.undecided = &a.undecided
			}
			vp.Validate(pv)
		}
	}
	for k, src := range a.raw.sources {
		if _, ok := b.set[k]; ok {
			b.set[k] = src.String()
		}
	}
	a.enabled = plugins.Enabled
	a.validatePublicAdmin(errs, enabled)
	*errs = append(*errs, sharedPorts(&a.cfg, listens)...)
	order, err := startOrder(plugins.Enabled, a.compiled, enabled)
	if err != nil {
		*errs = append(*errs, err...)
	}
	a.plugins = order
	a.raw.nameVariables(*errs)
	a.raw.relabel(*errs)
}

// enabledSet returns the plugins of [plugins] enabled that can run,
// reporting each entry that cannot: an empty one, one listed twice, one
// not compiled in.
func (a *App) enabledSet(names []string, errs *ConfigErrors) map[string]bool {
	enabled := map[string]bool{}
	for i, name := range names {
		switch {
		case name == "":
			// A trailing comma in JFAST_PLUGINS_ENABLED, or "" in the file:
			// no plugin is meant, so no plugin is suggested.
			fix := `remove the "" from the list`
			if a.raw.sources["plugins.enabled"].Kind == "env" {
				fix = "remove the comma that has no plugin name after it (or before it)"
			}
			*errs = append(*errs, ConfigError{Key: "plugins.enabled", Problem: fmt.Sprintf("entry %d of %d is empty", i+1, len(names)), Fix: fix})
		case enabled[name]:
			*errs = append(*errs, ConfigError{Key: "plugins.enabled", Problem: fmt.Sprintf("plugin %q is listed twice", name), Fix: "list each plugin once"})
		case a.compiled[name] == nil:
			problem := fmt.Sprintf("plugin %q is enabled but not compiled into this service", name)
			if a.misspelt(name) {
				// A name one or two edits from a known plugin is a typo,
				// not a plugin to compile in.
				problem = fmt.Sprintf("plugin %q is enabled, but no plugin has that name", name)
			}
			*errs = append(*errs, ConfigError{Key: "plugins.enabled", Problem: problem, Fix: a.compileFix(name)})
		default:
			enabled[name] = true
		}
	}
	return enabled
}

// uncompiledTables reports each table of [plugin] that names no plugin
// compiled in: an error when the file writes it, and when only the
// environment does, what [App.uncompiledVariables] says.
func (a *App) uncompiledTables(pluginTables map[string]any, errs *ConfigErrors) {
	for _, name := range slices.Sorted(maps.Keys(pluginTables)) {
		if a.compiled[name] != nil {
			continue
		}
		if _, isTable := pluginTables[name].(map[string]any); !isTable && name == "enabled" {
			// [plugin] holds one table per plugin; [plugins] the list.
			*errs = append(*errs, ConfigError{Key: "plugin.enabled", Problem: "is in [plugin], which holds one table per plugin ([plugin.db], [plugin.cache])",
				Fix: "write the list under [plugins] (with an s): [plugins] enabled = [...]"})
			continue
		}
		if vars := envOnly(a.raw.sources, "plugin."+name); len(vars) > 0 {
			a.uncompiledVariables(name, vars, errs)
			continue
		}
		fix := a.compileFix(name)
		if s := suggest(name, slices.Collect(maps.Keys(a.compiled))); s != "" {
			fix = fmt.Sprintf("did you mean [plugin.%s]?", s)
		}
		*errs = append(*errs, ConfigError{Key: "plugin." + name, Problem: "configures a plugin that is not compiled into this service", Fix: fix})
	}
}

// uncompiledVariables judges the variables JFAST_<NAME>_* that alone speak
// of name, a plugin not compiled in. Deployments share environments between
// services, so a variable meant for a sibling's plugin is not this
// service's mistake: it is ignored, loudly. But a NAME within the
// did-you-mean distance of a section (APP, PLUGINS) or of a plugin
// compiled in or shipped with jfast, and itself no plugin jfast ships, is a
// misspelling (JFAST_APPP_LISTEN, JFAST_PLUGIN_ENABLED, JFAST_CAHCE_URL):
// ignored, the service would boot without the setting, so each variable is
// an error naming the one it was meant to be.
func (a *App) uncompiledVariables(name string, vars []string, errs *ConfigErrors) {
	if near := a.sectionNear(name); near != "" {
		section := "plugin." + near
		if near == "app" || near == "plugins" {
			section = near
		}
		meant := make([]string, len(vars))
		for i, v := range vars {
			meant[i] = envName(section + strings.TrimPrefix(envKey(v), "plugin."+name))
		}
		*errs = append(*errs, ConfigError{Key: strings.Join(vars, ", "),
			Problem: fmt.Sprintf("%q is no section (app, plugins) and no plugin jfast ships or this service compiles in, and it is %s from %q", name, edits(name, near), near),
			Fix:     fmt.Sprintf("did you mean %s? (JFAST_* variables for another service's own plugin need a plugin name unlike %q)", strings.Join(meant, ", "), near)})
		return
	}
	verb := "configures"
	if len(vars) > 1 {
		verb = "configure"
	}
	a.raw.warnings = append(a.raw.warnings, fmt.Sprintf("plugin.%s: %s %s a plugin this service does not compile in; ignored", name, strings.Join(vars, ", "), verb))
}

// sectionNear returns the section or plugin name that name, the first
// segment of a JFAST_* variable and no plugin compiled in, is a misspelling
// of: the closest of app, plugins and the plugins compiled in or shipped
// with jfast one typo away (a letter added, dropped or changed, or two
// neighbouring letters swapped), or "" when name is a plugin jfast ships or
// further from all of them. The did-you-mean distance of keys (two edits)
// would refuse what is no typo: every name of two letters is two edits from
// db (a sibling's JFAST_CI_*), and a deployment's JFAST_STAGE_* two from
// storage.
func (a *App) sectionNear(name string) string {
	if roster.Has(name) {
		return ""
	}
	known := append(slices.Collect(maps.Keys(a.compiled)), roster.Names...)
	near := suggest(name, append(known, "app", "plugins"))
	if near == "" || editDistance(name, near) > 1 && !swapped(name, near) {
		return ""
	}
	return near
}

// swapped reports whether a is b with two neighbouring letters swapped.
func swapped(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}

// bindPlugin decodes the [plugin.<name>] table (its critical key, then the
// plugin's own keys) into the plugin's configuration, reporting into b.
func (a *App) bindPlugin(b *binder, name string, pluginTables map[string]any) {
	key := "plugin." + name
	m, _ := tableAt(b, pluginTables, name)
	if m == nil {
		m = map[string]any{}
	}
	if c, ok := m["critical"]; ok {
		crit, isBool := c.(bool)
		if s, isString := c.(string); isString && (s == "true" || s == "false") {
			crit, isBool = s == "true", true
		}
		if !isBool {
			*b.errs = append(*b.errs, ConfigError{Key: key + ".critical", Problem: fmt.Sprintf("must be true or false, got %s", describe(c)), Fix: "set critical = true only for a dependency without which this replica is useless"})
		}
		a.critical[name] = crit
		b.set[key+".critical"] = ""
		m = mapWithout(m, "critical")
	}
	if cp, ok := a.compiled[name].(Configurable); ok {
		cfg := cp.Config()
		b.bindStruct(key, reflectValue(cfg), m)
		a.tables[name] = cfg
	} else {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			b.unknown(key+"."+k, k, []string{"critical"}, nil)
		}
	}
}

func (a *App) compileFix(name string) string {
	if roster.Has(name) {
		return fmt.Sprintf(`import %q and add %s.New() to framework.Options.Plugins in main`, roster.Import(name), name)
	}
	if s := a.knownPluginNear(name); s != "" {
		return fmt.Sprintf("did you mean %q?", s)
	}
	return "remove it, or compile the plugin in: jfast's plugins are " + strings.Join(roster.Names, ", ")
}

// knownPluginNear returns the name of a plugin compiled in or shipped with
// jfast within the did-you-mean distance of name, or "".
func (a *App) knownPluginNear(name string) string {
	known := slices.Sorted(maps.Keys(a.compiled))
	return suggest(name, append(known, roster.Names...))
}

// misspelt reports whether name, a plugin that is not compiled in, is no
// plugin jfast ships and is close to one that is compiled in or shipped:
// "cahce" for "cache".
func (a *App) misspelt(name string) bool {
	return a.compiled[name] == nil && !roster.Has(name) && a.knownPluginNear(name) != ""
}

// startOrder sorts the enabled plugins so each starts after its dependencies, ties
// broken by the order of [plugins] enabled.
func startOrder(names []string, compiled map[string]Plugin, enabled map[string]bool) ([]Plugin, ConfigErrors) {
	var errs ConfigErrors
	deps := map[string][]string{}
	for _, name := range names {
		if !enabled[name] {
			continue
		}
		d, ok := compiled[name].(Dependent)
		if !ok {
			continue
		}
		for _, dep := range d.Dependencies() {
			switch {
			case enabled[dep.Name]:
				deps[name] = append(deps[name], dep.Name)
			case !dep.Optional:
				errs = append(errs, ConfigError{Key: "plugins.enabled", Problem: fmt.Sprintf("plugin %q needs plugin %q, which is not enabled", name, dep.Name), Fix: fmt.Sprintf("add %q to [plugins] enabled", dep.Name)})
			}
		}
	}
	var order []Plugin
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(string, []string)
	visit = func(name string, path []string) {
		switch state[name] {
		case 2:
			return
		case 1:
			errs = append(errs, ConfigError{Key: "plugins.enabled", Problem: "plugins depend on each other in a cycle: " + strings.Join(append(path, name), " → "), Fix: "this is a bug in those plugins; report it"})
			return
		}
		state[name] = 1
		for _, dep := range deps[name] {
			visit(dep, append(path, name))
		}
		state[name] = 2
		order = append(order, compiled[name])
	}
	for _, name := range names {
		if enabled[name] {
			visit(name, nil)
		}
	}
	return order, errs
}

func mapWithout(m map[string]any, key string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// tableAt returns tree[key] as a table; a value that is not a table is an error.
func tableAt(b *binder, tree map[string]any, key string) (map[string]any, bool) {
	v, ok := tree[key]
	if !ok || v == nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		b.errorf(key, "write it as a table: ["+key+"]", "must be a table, got %s", describe(v))
		return nil, false
	}
	return m, true
}
