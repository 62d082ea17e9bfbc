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
}

// BadName returns the problem and fix of name, an entry of the table that
// [ValidName] refuses, in the words every table of named entries shares:
//
//	is not a valid upstream name; fix: rename it: a name is <NameRule> ("billing" would do; it names the upstream in metrics and in JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL)
//
// The name offered is one NameRule accepts, made from name (see
// [NameLike]); there is none when no such name is near it. A quoted name
// with "." (`[plugin.http.upstreams."up1.headers"]`) is told what the
// file would say without its quotes.
func (t NamedTable) BadName(name string) (problem, fix string) {
	env := strings.ToUpper("JFAST_" + t.Plugin + "_" + t.Key + "__<NAME>__" + cmp.Or(t.DeployKey, "*"))
	problem, fix = NameRefusal(t.Noun, name, "it names the "+t.Noun+" in metrics and in "+env)
	if whole := strings.ReplaceAll(name, quotedDot, "."); whole != name {
		i := strings.LastIndexByte(whole, '.')
		fix += fmt.Sprintf("; without its quotes, [plugin.%s.%s.%s] is the table %q of the %s %q", t.Plugin, t.Key, whole, whole[i+1:], t.Noun, whole[:i])
	}
	return problem, fix
}

// NameRefusal returns the problem and fix of name, a name of a noun
// ("queue", "disk") that [ValidName] refuses, where uses says what the
// name is used for ("it names the disk in metrics and in the signed
// route"): the one wording of the name rule, which [NamedTable.BadName]
// and a key whose value is a name (mail's queue) share.
func NameRefusal(noun, name, uses string) (problem, fix string) {
	if like := NameLike(name); like != "" {
		uses = fmt.Sprintf("%q would do; %s", like, uses)
	}
	return "is not a valid " + noun + " name", "rename it: a name is " + NameRule + " (" + uses + ")"
}

// NameLike returns a name [ValidName] accepts that is name written by the
// rule: in lower case, without its leading - and _, cut at 100 characters
// ("Billing" is "billing", "-ab" is "ab"). It returns "" when that is not
// enough (a name of other letters, such as "ünï", or with a "." or a space),
// as a name offered in a fix must be one the boot accepts.
func NameLike(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	s := strings.TrimLeft(string(b), "-_")
	if len(s) > maxNameLen {
		s = s[:maxNameLen]
	}
	if s == name || !ValidName(s) {
		return ""
	}
	return s
}

// ValidateName records an error under the entry's key (<Key>.<name>) when
// [ValidName] refuses name, in the words of [NamedTable.BadName], and
// reports whether the name is valid. [ValidateNamed] calls it for each
// entry; a plugin that validates its entries itself (a storage disk, a
// queue) calls it for each name.
func (t NamedTable) ValidateName(v *Validation, name string) bool {
	if ValidName(name) {
		return true
	}
	problem, fix := t.BadName(name)
	v.Error(t.Key+"."+name, problem, fix)
	return false
}

// Unread reports whether the entry name was not read as the file's author
// meant: its quoted name has "." in it (`[plugin.http.upstreams."up1.headers"]`),
// so the loader kept it apart as an entry of its own, whose keys' errors it
// does not report. Its name is its one error; a plugin validating its
// entries itself skips the rest of its checks for it.
func Unread(name string) bool { return strings.Contains(name, quotedDot) }

// ValidateNamed checks every entry of a table of named entries, in name
// order, each under its own key (<Key>.<name>): a name [ValidName] refuses
// is reported in the words of [NamedTable.BadName], then every problem the
// entry's problems function returns (keys relative to the entry), unless
// the entry was not read ([Unread]).
func ValidateNamed[C any](v *Validation, t NamedTable, entries map[string]C, problems func(C) []ConfigError) {
	for _, n := range slices.Sorted(maps.Keys(entries)) {
		if !t.ValidateName(v, n) && Unread(n) {
			continue
		}
		sub := t.Entry(v, n)
		for _, e := range problems(entries[n]) {
			sub.Error(e.Key, e.Problem, e.Fix)
		}
	}
}

// Entry is v for the keys of entry name ([plugin.<plugin>.<key>.<name>]): a
// fix its errors give that names a JFAST_…__<NAME>__… variable is written
// with the entry's name, as ValidateNamed writes it.
func (t NamedTable) Entry(v *Validation, name string) *Validation {
	s := v.Sub(t.Key + "." + name)
	s.entry = name
	return s
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
// JFAST_HTTP_UPSTREAMS__BILLING__BASE_URL). A name with "-" is written as
// it is (JFAST_HTTP_UPSTREAMS__SEA-SNAKE__BASE_URL): the loader reads such a
// variable, which env(1), Docker and Kubernetes set though a shell's export
// cannot. A name the rule refuses keeps the placeholder.
func nameVariable(fix, name string) string {
	if !ValidName(name) {
		return fix
	}
	return strings.ReplaceAll(fix, "__<NAME>__", "__"+strings.ToUpper(name)+"__")
}
