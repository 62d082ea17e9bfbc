package framework

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
)

// NamedTable describes a table of named entries in a plugin's configuration,
// [plugin.<Plugin>.<Key>.<name>] (the http plugin's upstreams, the llm
// plugin's providers), in the words its errors use. [ValidateNamed] checks
// the entries with it and a [Named] answers a lookup by name with it.
type NamedTable struct {
	Plugin string // the plugin's name: "http"
	Key    string // the table's key under [plugin.<Plugin>]: "upstreams"
	Noun   string // one entry, as errors name it: "upstream", "shared client"
	Nouns  string // more than one: "upstreams", "shared clients"
	// Needs is what a new entry must set, said after "add a [...] table":
	// "with its base_url". Empty when the table needs nothing.
	Needs string
	// DeployKey is the entry's key its environment variable is shown for in
	// the fix of a bad name ("base_url": JFAST_<PLUGIN>_<KEY>__<NAME>__BASE_URL).
	// Empty: the entry's variables as a whole (…__<NAME>__*).
	DeployKey string
	// BadName and NameFix are the problem and fix reported for an entry
	// whose name [ValidName] refuses. Empty: "is not a valid <noun> name",
	// and a fix that states [NameRule] and where the name is used (the
	// metrics, the entry's environment variables).
	BadName, NameFix string
}

// badName returns the problem and fix of an entry whose name [ValidName]
// refuses.
func (t NamedTable) badName() (problem, fix string) {
	problem, fix = t.BadName, t.NameFix
	if problem == "" {
		problem = "is not a valid " + t.Noun + " name"
	}
	if fix == "" {
		key := cmp.Or(t.DeployKey, "*")
		env := strings.ToUpper("JFAST_" + t.Plugin + "_" + t.Key + "__<NAME>__" + key)
		fix = "rename it: a name is " + NameRule + " (it names the " + t.Noun + " in metrics and in " + env + ")"
	}
	return problem, fix
}

// ValidateNamed checks every entry of a table of named entries, in name
// order, each under its own key (<Key>.<name>): a name [ValidName] refuses
// is reported with the table's BadName and NameFix, then every problem the
// entry's problems function returns (keys relative to the entry).
func ValidateNamed[C any](v *Validation, t NamedTable, entries map[string]C, problems func(C) []ConfigError) {
	problem, fix := t.badName()
	for _, n := range slices.Sorted(maps.Keys(entries)) {
		sub := v.Sub(t.Key + "." + n)
		if !ValidName(n) {
			sub.Error("", problem, fix)
		}
		for _, e := range problems(entries[n]) {
			sub.Error(e.Key, e.Problem, nameVariable(e.Fix, n))
		}
	}
}

// Named holds what a plugin built from each entry of a [NamedTable] (a
// client per upstream), by the entry's name, in name order. The zero value
// is empty and ready. The plugin fills it when it starts and guards it with
// its own lock; a copy taken under that lock may be read after it, since a
// started plugin adds nothing.
type Named[T any] struct {
	byName map[string]T
}

// BuildNamed builds a value from each entry of a table of named entries
// (a client per upstream), in name order, with build, and holds them by
// name. The first error stops it: it returns the error with the values
// built before it, for the caller to close.
func BuildNamed[C, T any](entries map[string]C, build func(name string, entry C) (T, error)) (Named[T], error) {
	var n Named[T]
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		v, err := build(name, entries[name])
		if err != nil {
			return n, err
		}
		n.Add(name, v)
	}
	return n, nil
}

// Add sets the value of name.
func (n *Named[T]) Add(name string, v T) {
	if n.byName == nil {
		n.byName = map[string]T{}
	}
	n.byName[name] = v
}

// Get returns the value of name and whether there is one.
func (n Named[T]) Get(name string) (T, bool) {
	v, ok := n.byName[name]
	return v, ok
}

// Len returns the number of names.
func (n Named[T]) Len() int { return len(n.byName) }

// All yields every name and its value in name order.
func (n Named[T]) All() iter.Seq2[string, T] {
	return func(yield func(string, T) bool) {
		for _, name := range slices.Sorted(maps.Keys(n.byName)) {
			if !yield(name, n.byName[name]) {
				return
			}
		}
	}
}

// Lookup returns the value of name for the plugin's accessor (Client,
// Provider); t is the table the values were built from. started is whether
// the plugin has started: before, nothing is built yet, and the error says to
// ask when mounting routes. After, an unknown name is an error naming the
// table to add and the names there are:
//
//	http: no upstream 'billing' is configured: add a [plugin.http.upstreams.billing] table with its base_url; configured upstreams: orders, payments
func (n Named[T]) Lookup(t NamedTable, name string, started bool) (T, error) {
	if v, ok := n.byName[name]; ok {
		return v, nil
	}
	var zero T
	if !started {
		return zero, fmt.Errorf("%s: the %s plugin has not started; ask for %s '%s' when mounting routes", t.Plugin, t.Plugin, t.Noun, name)
	}
	fix := "add a [plugin." + t.Plugin + "." + t.Key + "." + name + "] table"
	if t.Needs != "" {
		fix += " " + t.Needs
	}
	if len(n.byName) > 0 {
		fix += "; configured " + t.Nouns + ": " + strings.Join(slices.Sorted(maps.Keys(n.byName)), ", ")
	}
	return zero, fmt.Errorf("%s: no %s '%s' is configured: %s", t.Plugin, t.Noun, name, fix)
}

// nameVariable writes entry name into the JFAST_*__<NAME>__* variables a
// fix names (JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL for upstream billing is
// JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL). A name with "-" cannot be part of
// a variable's name: its fix keeps the placeholder.
func nameVariable(fix, name string) string {
	if strings.Contains(name, "-") || !ValidName(name) {
		return fix
	}
	return strings.ReplaceAll(fix, "__<NAME>__", "__"+strings.ToUpper(name)+"__")
}
