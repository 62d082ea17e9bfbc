package framework

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/knadh/koanf/maps"
	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/v2"
)

// envPrefix starts every variable jfast reads.
const envPrefix = "JFAST_"

// Source says where a configuration value came from.
type Source struct {
	Kind   string // "default", "file" or "env"
	EnvVar string // the variable's name when Kind is "env"
}

func (s Source) String() string {
	if s.Kind == "env" {
		return "env " + s.EnvVar
	}
	return s.Kind
}

// rawConfig is the file and the environment merged by the deploy/shape rules, before
// it is bound to typed structs.
type rawConfig struct {
	tree    map[string]any    // nested, as the binder walks it
	sources map[string]Source // flat key → where its value came from
	// declared holds every table and key the file writes, by full key,
	// empty tables included: an entry of a table of tables
	// ([plugin.http.upstreams.billing]) the file declares is in it.
	declared map[string]bool
	// created maps each entry of a table of tables that the environment
	// alone created (the file does not declare it) to the variables that
	// created it; the binder fills it.
	created map[string][]string
	// spelled maps the flat key of each quoted key with "." in it that the
	// file writes (its dots kept as [quotedDot]) to the file's own spelling
	// of the key up to it: plugin.http.upstreams."a.b". Errors name it so.
	spelled  map[string]string
	warnings []string
	errs     ConfigErrors
}

// envKey maps JFAST_<SECTION>_<KEY> to a config key: SECTION is "APP", "PLUGINS" or
// a plugin name; "__" separates deeper levels of KEY. It returns "" for variables
// that are not configuration (JFAST_CONFIG, JFAST_DRILL_*...).
func envKey(name string) string {
	rest, ok := strings.CutPrefix(name, envPrefix)
	if !ok {
		return ""
	}
	section, key, ok := strings.Cut(rest, "_")
	if !ok || section == "" || key == "" {
		return ""
	}
	section = strings.ToLower(section)
	key = strings.ToLower(strings.ReplaceAll(key, "__", "."))
	switch section {
	case "config", "drill", "test":
		return ""
	case "app", "plugins":
		return section + "." + key
	default:
		return "plugin." + section + "." + key
	}
}

// loadRaw reads the TOML text and the environment and merges them. isDeploy says
// whether a flat key is a deploy key (environment wins) or a shape key (file
// wins); secret whether a key holds a secret (never shown, even in a syntax
// error's line). The warnings about a variable and the file disagreeing name
// the key, the variable and the file, never a value.
func loadRaw(fileName string, text []byte, environ []string, isDeploy, secret func(string) bool) *rawConfig {
	raw := &rawConfig{sources: map[string]Source{}, declared: map[string]bool{}, created: map[string][]string{}, spelled: map[string]string{}}
	fileValues := map[string]any{}
	var emptyTables []string
	if len(text) > 0 {
		doc, err := toml.Parser().Unmarshal(text)
		if err != nil {
			raw.errs = append(raw.errs, tomlError(fileName, text, err, secret))
		} else {
			// Keys are split on "." from here on: a quoted key's own dots
			// are kept apart, so "a.b" stays one key (see quotedDot).
			fileValues, _ = maps.Flatten(keepQuotedDots(doc), nil, ".")
			raw.spelled = quotedKeys(text)
		}
	}
	merged := make(map[string]any, len(fileValues))
	for key := range fileValues {
		for k := key; ; {
			raw.declared[k] = true
			i := strings.LastIndexByte(k, '.')
			if i < 0 {
				break
			}
			k = k[:i]
		}
	}
	for key, v := range fileValues {
		if m, ok := v.(map[string]any); ok && len(m) == 0 {
			// An empty table ([plugin.http.upstreams.billing] with no keys) is a
			// leaf in the flat map; unflattened after an environment key below
			// it, it would hide that key. It is put back as a table after the
			// merge, where nothing else made one: it names an entry (an
			// upstream, a disk) whose missing keys must be reported.
			emptyTables = append(emptyTables, key)
			continue
		}
		merged[key] = v
		raw.sources[key] = Source{Kind: "file"}
	}

	envValues := map[string]string{}
	envNames := map[string]string{}
	ek := koanf.New(".")
	// The provider's own delimiter handling is bypassed: envKey already returns
	// dotted keys, and koanf nests them on ".".
	err := ek.Load(env.Provider(".", env.Opt{
		Prefix: envPrefix,
		TransformFunc: func(name, value string) (string, any) {
			key := envKey(name)
			if key == "" {
				return "", nil
			}
			if strings.Contains(name, ".") {
				// "." would split the key as "__" does: a second spelling
				// of every variable, read by some tools and not others.
				raw.errs = append(raw.errs, ConfigError{Key: name, Problem: `has "." in its name, and only "__" separates the levels of a key`,
					Fix: "rename it " + strings.ReplaceAll(name, ".", "__")})
				return "", nil
			}
			envValues[key] = value
			envNames[key] = name
			return key, value
		},
		EnvironFunc: func() []string { return environ },
	}), nil)
	if err != nil {
		raw.errs = append(raw.errs, ConfigError{Key: "environment", Problem: err.Error(), Fix: "check the JFAST_* variables"})
	}

	keys := make([]string, 0, len(envValues))
	for key := range envValues {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		value, name := envValues[key], envNames[key]
		fileValue, inFile := fileValues[key]
		differs := inFile && fmt.Sprint(fileValue) != value
		switch {
		case isDeploy(key):
			merged[key] = value
			raw.sources[key] = Source{Kind: "env", EnvVar: name}
			if differs {
				// Values are never printed: deploy keys hold DSNs and secrets.
				raw.warnings = append(raw.warnings, fmt.Sprintf("%s: %s and %s disagree; the environment wins because %s is a deploy key", key, name, fileName, key))
			}
		case inFile:
			if differs {
				// No value either: which keys hold a secret is the plugin's
				// word, and a value under a key nobody declared can still be one.
				raw.warnings = append(raw.warnings, fmt.Sprintf("%s: %s is ignored; %s wins because %s is a shape key (remove the variable or change the file)", key, name, fileName, key))
			}
		default:
			merged[key] = value
			raw.sources[key] = Source{Kind: "env", EnvVar: name}
		}
	}
	raw.tree = maps.Unflatten(merged, ".")
	for _, key := range emptyTables {
		putTable(raw.tree, strings.Split(key, "."))
	}
	return raw
}

// locate gives each error about a value of the file the line of fileName that
// writes it (see [keyLines] and [lineOf]). An error about a value the
// environment set keeps no line, and so does a syntax error, whose key
// already says where it is.
func (raw *rawConfig) locate(fileName string, text []byte, errs ConfigErrors) {
	lines := keyLines(text)
	for i, e := range errs {
		key := listKey(e.Key)
		if e.Line > 0 || strings.HasPrefix(e.Key, fileName+":") || raw.sources[key].Kind == "env" || e.EnvVar != "" {
			continue
		}
		if entry, _ := raw.createdEntry(key); entry != "" {
			// The file has no line for an entry it does not declare:
			// the nearest table above it would be an unrelated line.
			continue
		}
		if l := lineOf(lines, key); l > 0 {
			errs[i].File, errs[i].Line = fileName, l
		}
	}
}

// nameVariables gives each error about a value the environment set the
// variable that set it (ConfigError.EnvVar): such a value has no line in
// the file, so the variable is what says where to correct it. An error
// about an element of a list names the list's variable; one about a table
// the environment alone wrote, every variable under it. An error about a
// key nobody set (one the file lacks) names none.
//
// An error about a key nobody set inside an entry the environment alone
// created (a base_url missing from an upstream that only
// JFAST_HTTP_UPSTREAMS__EXAMPL__TIMEOUT speaks of) says so in its problem,
// naming the variables that created the entry: the variable, not the
// file, is what to correct.
func (raw *rawConfig) nameVariables(errs ConfigErrors) {
	for i, e := range errs {
		if e.EnvVar == "" {
			errs[i].EnvVar = strings.Join(envOnly(raw.sources, listKey(e.Key)), ", ")
		}
		if errs[i].EnvVar != "" {
			continue
		}
		if entry, vars := raw.createdEntry(listKey(e.Key)); entry != "" {
			errs[i].Problem += fmt.Sprintf(" (the entry was created by %s alone: the file has no [%s])", strings.Join(vars, ", "), entry)
		}
	}
}

// createdEntry returns the entry the environment alone created that key is
// or lies in, and the variables that created it; "" when there is none.
func (raw *rawConfig) createdEntry(key string) (string, []string) {
	for k := key; ; {
		if vars, ok := raw.created[k]; ok {
			return k, vars
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return "", nil
		}
		k = k[:i]
	}
}

// listKey returns the key that writes the value an error is about: for an
// element of a list ("plugin.http.upstreams.orders.instances[1]") the
// list's, whose line is the element's (or the line the list starts on), or
// whose variable set it.
func listKey(key string) string {
	for strings.HasSuffix(key, "]") {
		i := strings.LastIndexByte(key, '[')
		if i < 0 || strings.Trim(key[i+1:len(key)-1], "0123456789") != "" || i+2 == len(key) {
			break
		}
		key = key[:i]
	}
	return key
}

// putTable makes an empty table at path in tree unless something is already
// there.
func putTable(tree map[string]any, path []string) {
	for i, seg := range path {
		next, ok := tree[seg]
		if !ok {
			next = map[string]any{}
			tree[seg] = next
		}
		m, ok := next.(map[string]any)
		if !ok {
			return // a value is there: the binder reports it if it is wrong
		}
		if i == len(path)-1 {
			return
		}
		tree = m
	}
}

// quotedDot stands for a "." inside a quoted key of the file
// (`[plugin.http.upstreams."a.b"]`) while keys are split on ".": the key
// stays one key, "a\x00b", named in errors as the file spells it (see
// [rawConfig.relabel]), and never merges into a table its parts name
// ("up1.headers" is not up1's headers). In a table of named entries it is
// a name [ValidName] refuses; in a table whose keys are not names (headers,
// resource attributes) the binder gives the key back its dot.
const quotedDot = "\x00"

// keepQuotedDots returns the parsed file with the "." of each key replaced
// by [quotedDot].
func keepQuotedDots(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = keepQuotedDots(sub)
		}
		out[strings.ReplaceAll(k, ".", quotedDot)] = v
	}
	return out
}

// restoreDots gives the keys of v (a value bound to a table whose keys are
// not names) back their dots.
func restoreDots(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, sub := range m {
		out[strings.ReplaceAll(k, quotedDot, ".")] = restoreDots(sub)
	}
	return out
}

// relabel names each key of errs that holds a quoted key with "." as the
// file spells it (plugin.http.upstreams."a.b".base_url), and gives the
// dots back to the names their problems and fixes quote.
func (raw *rawConfig) relabel(errs ConfigErrors) {
	for i, e := range errs {
		if !strings.Contains(e.Key+e.Problem+e.Fix, quotedDot) {
			continue
		}
		best := ""
		for k := range raw.spelled {
			if (e.Key == k || strings.HasPrefix(e.Key, k+".")) && len(k) > len(best) {
				best = k
			}
		}
		if best != "" {
			errs[i].Key = raw.spelled[best] + e.Key[len(best):]
		}
		errs[i].Key = strings.ReplaceAll(errs[i].Key, quotedDot, ".")
		errs[i].Problem = strings.ReplaceAll(e.Problem, quotedDot, ".")
		errs[i].Fix = strings.ReplaceAll(e.Fix, quotedDot, ".")
	}
}

// readConfigFile returns the file's text. An explicit path must exist; the default
// path (jfast.toml in the working directory) may be absent.
func readConfigFile(path string, explicit bool) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		if !explicit && os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	return text, nil
}

// matchKey reports whether key matches pattern, where a "*" segment matches any one
// segment: "plugin.http.upstreams.*.base_url". A last "*" matches the rest of
// the key: the name of a header may have "." in it ("x.trace", quoted in the
// file), and "upstreams.*.headers.*" must cover it.
func matchKey(pattern, key string) bool {
	ps, ks := strings.Split(pattern, "."), strings.Split(key, ".")
	if len(ks) > len(ps) && ps[len(ps)-1] == "*" {
		ks = append(ks[:len(ps)-1], strings.Join(ks[len(ps)-1:], "."))
	}
	if len(ps) != len(ks) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != ks[i] {
			return false
		}
	}
	return true
}
