package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/jfastframework/jfast/internal/roster"
	"github.com/jfastframework/jfast/internal/tomltext"

	"github.com/jfastframework/jfast/framework"
)

//go:embed templates recipes
var templateFS embed.FS

// Options say what service to write.
type Options struct {
	// Name is the service's name: its directory, binary and app.name. Lower case
	// letters, digits and dashes, starting with a letter.
	Name string
	// Module is the Go module path. Defaults to Name.
	Module string
	// Dir is where to write. Defaults to ./Name. It must not exist or be empty.
	Dir string
	// Plugins are the plugins to add besides observability, in any order.
	Plugins []string
	// Framework is the framework checkout go.mod's replace points at.
	Framework string
	// Available are the plugins compiled into the CLI, by name: their Config()
	// gives jfast.toml's defaults. A chosen plugin must be available and have a
	// recipe.
	Available map[string]func() framework.Plugin
}

// FrameworkModule reports whether dir holds the framework's go.mod.
func FrameworkModule(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("framework checkout %s: %w", dir, err)
	}
	if modLine(b) != modulePath {
		return fmt.Errorf("framework checkout %s: go.mod is module %q, not %s", dir, modLine(b), modulePath)
	}
	return nil
}

func modLine(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// File is one generated file.
type File struct {
	Path string // slash-separated, relative to the service's directory
	Data []byte
	Mode os.FileMode
}

// Listen is the address a new service listens on: 127.0.0.1:8100, next to the
// examples' ports (8000 orders, 8010 billing, 8020 and 9020 inventory, 8090 the
// gateway, 9000, 9010, 9030 and 9090 their admin listeners), so that `go run .`
// works while the repository's `make run` is up.
const Listen = "127.0.0.1:8100"

// Port is Listen's port.
const Port = "8100"

// templateData is what the templates see.
type templateData struct {
	Name, Module, Framework string
	GoVersion               string // "1.26"
	Port                    string // Listen's port
	DBPrefix                string // the name part of the tests' private databases
	Queue                   string // the service's queue: its name
	TestQueue               string // the name part of the tests' own queues
	Recipes                 []recipe
	Has                     map[string]bool
	Enabled                 string // TOML list
	Compose                 string // the dependencies' services
	ComposeEnv              []string
	DependsOn               []string
}

// ComposeEnvOrExample is an example JFAST_ variable for the README.
func (d templateData) ComposeEnvOrExample() []string {
	for _, r := range d.Recipes {
		keys := slices.Sorted(maps.Keys(r.Settings))
		for _, k := range keys {
			if env := envName(k); env != "" {
				return []string{env + "=" + strings.Trim(r.Settings[k], `"`)}
			}
		}
	}
	return []string{"JFAST_APP_LOG_LEVEL=debug"}
}

// envName is the variable for a plugin key: plugin.db.url → JFAST_DB_URL.
func envName(key string) string {
	rest, ok := strings.CutPrefix(key, "plugin.")
	if !ok {
		return ""
	}
	plugin, k, _ := strings.Cut(rest, ".")
	return "JFAST_" + strings.ToUpper(plugin) + "_" + strings.ToUpper(strings.ReplaceAll(k, ".", "__"))
}

// dbPrefix is the service's name as the name part of a jfasttest private
// database: dashes become underscores, at most 20 characters.
func dbPrefix(name string) string {
	return cut(strings.ReplaceAll(name, "-", "_"), 20, "_")
}

// cut shortens name to at most n bytes, without the separators the cut leaves
// at its end.
func cut(name string, n int, sep string) string {
	if len(name) <= n {
		return name
	}
	return strings.TrimRight(name[:n], sep)
}

// testQueueSuffix is what the generated tests add to testQueue(queue) to make a
// queue of their own: "-test-" and 16 hex digits of a random uint64 (ownQueue
// in templates/routes_test.go.tmpl).
const testQueueSuffix = len("-test-") + 16

// riverQueueMax is the longest queue name River, the postgres backend, takes
// (queue.RiverQueueRule).
const riverQueueMax = 64

// testQueue is the name part of the generated tests' own queues: the service's
// queue, cut so that with testQueueSuffix it stays within riverQueueMax (a
// name of up to 42 characters is whole), and not ending in a dash, which River
// refuses before another.
func testQueue(queue string) string { return cut(queue, riverQueueMax-testQueueSuffix, "-") }

// queueName is the queue the service works and enqueues to: its own name, so
// that services sharing a database, a Redis or a broker never take each
// other's jobs. A service name (nameRule) is a valid queue name.
func queueName(service string) string { return service }

// settings are the keys jfast.toml sets for the chosen recipes: each recipe's
// Settings, and the service's queue.
func settings(service string, chosen []recipe) map[string]string {
	set := map[string]string{}
	for _, r := range chosen {
		for k, v := range r.Settings {
			set[k] = v
		}
		if r.Name == "queue" {
			set["plugin.queue.queues."+queueName(service)+".concurrency"] = "10"
		}
	}
	return set
}

// Files returns the files of the service, without writing anything.
func Files(o Options) ([]File, error) {
	if err := Check(o.Name, o.Module); err != nil {
		return nil, err
	}
	if o.Module == "" {
		o.Module = o.Name
	}
	if err := FrameworkModule(o.Framework); err != nil {
		return nil, err
	}
	chosen, err := choose(o.Plugins, o.Available)
	if err != nil {
		return nil, err
	}
	gomod, err := os.ReadFile(filepath.Join(o.Framework, "go.mod"))
	if err != nil {
		return nil, err
	}
	gosum, err := os.ReadFile(filepath.Join(o.Framework, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("framework checkout %s: %w", o.Framework, err)
	}

	d := templateData{Name: o.Name, Module: o.Module, Framework: o.Framework, Recipes: chosen, Has: map[string]bool{}, Port: Port, DBPrefix: dbPrefix(o.Name), Queue: queueName(o.Name), TestQueue: testQueue(queueName(o.Name))}
	d.GoVersion = goVersion(gomod)
	names := []string{`"observability"`}
	for _, r := range chosen {
		d.Has[r.Name] = true
		names = append(names, fmt.Sprintf("%q", r.Name))
		if r.Compose != "" {
			if d.Compose != "" {
				d.Compose += "\n"
			}
			d.Compose += r.Compose
			d.DependsOn = append(d.DependsOn, strings.TrimSuffix(strings.TrimSpace(strings.SplitN(r.Compose, "\n", 2)[0]), ":"))
		}
		d.ComposeEnv = append(d.ComposeEnv, r.Env...)
	}
	d.Enabled = "[" + strings.Join(names, ", ") + "]"

	var files []File
	add := func(path string, data []byte, mode os.FileMode) {
		files = append(files, File{Path: path, Data: data, Mode: mode})
	}
	add("go.mod", goMod(o.Module, gomod, o.Framework), 0o644)
	add("go.sum", gosum, 0o644)
	toml, err := configFile(o, chosen)
	if err != nil {
		return nil, err
	}
	add("jfast.toml", toml, 0o644)

	for _, t := range []struct{ tmpl, path string }{
		{"templates/main.go.tmpl", "main.go"},
		{"templates/routes.go.tmpl", "routes.go"},
		{"templates/routes_test.go.tmpl", "routes_test.go"},
		{"templates/README.md.tmpl", "README.md"},
		{"templates/Makefile.tmpl", "Makefile"},
		{"templates/gitignore.tmpl", ".gitignore"},
		{"templates/dockerignore.tmpl", ".dockerignore"},
		{"templates/Dockerfile.tmpl", "Dockerfile"},
		{"templates/compose.yaml.tmpl", "compose.yaml"},
	} {
		b, err := render(t.tmpl, d)
		if err != nil {
			return nil, err
		}
		add(t.path, b, 0o644)
	}
	if d.Has["auth"] {
		for _, name := range []string{"token.go", "token_test.go"} {
			b, err := render("templates/"+name+".tmpl", d)
			if err != nil {
				return nil, err
			}
			add(name, b, 0o644)
		}
	}
	for _, r := range chosen {
		for _, suffix := range []string{".go", "_test.go"} {
			b, err := render("recipes/"+r.Name+suffix+".tmpl", d)
			if err != nil {
				return nil, err
			}
			add("routes_"+r.Name+suffix, b, 0o644)
		}
	}
	for i, f := range files {
		if strings.HasSuffix(f.Path, ".go") {
			src, err := format.Source(f.Data)
			if err != nil {
				return nil, fmt.Errorf("scaffold: %s does not format (a bug in its template): %w", f.Path, err)
			}
			files[i].Data = src
		}
	}
	return files, nil
}

// Write writes the service into o.Dir (default ./Name), which must not exist or be
// empty, and returns the directory.
func Write(o Options) (string, error) {
	files, err := Files(o)
	if err != nil {
		return "", err
	}
	dir := o.Dir
	if dir == "" {
		dir = o.Name
	}
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return "", fmt.Errorf("%s is not empty: jfast new never overwrites files; choose another --dir or remove it", dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, f.Data, f.Mode); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// choose resolves the chosen plugin names to recipes, in the roster's order.
func choose(names []string, available map[string]func() framework.Plugin) ([]recipe, error) {
	var can []string
	for _, r := range recipes() {
		if available[r.Name] != nil {
			can = append(can, r.Name)
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || n == "observability" {
			continue // observability is always there
		}
		if seen[n] {
			return nil, fmt.Errorf("plugin %q is listed twice", n)
		}
		seen[n] = true
		_, hasRecipe := recipeFor(n)
		switch {
		case hasRecipe && available[n] != nil:
		case available[n] != nil:
			return nil, fmt.Errorf("jfast new has no example for plugin %q yet; generate the service without it, then add %s.New() to Options in main.go and %q to [plugins] enabled; available: %s", n, n, n, strings.Join(can, ", "))
		case roster.Has(n):
			return nil, fmt.Errorf("plugin %q does not exist in this jfast yet (or is not compiled into this jfast binary), so jfast new cannot add it; available: %s", n, strings.Join(can, ", "))
		default:
			return nil, fmt.Errorf("unknown plugin %q; available: %s", n, strings.Join(can, ", "))
		}
	}
	var out []recipe
	for _, r := range recipes() {
		if !seen[r.Name] {
			continue
		}
		if len(r.NeedsOneOf) > 0 && !slices.ContainsFunc(r.NeedsOneOf, func(n string) bool { return seen[n] }) {
			need := r.NeedsOneOf[0]
			if len(r.NeedsOneOf) > 1 {
				need = "one of " + strings.Join(r.NeedsOneOf, " or ")
			}
			return nil, fmt.Errorf("plugin %q needs %s as well: add it to --plugins (e.g. --plugins %s,%s)", r.Name, need, r.NeedsOneOf[0], r.Name)
		}
		if seen["cache"] && !seen["db"] {
			switch r.Name {
			case "idempotency":
				r.Settings = map[string]string{"plugin.idempotency.store": `"redis"`}
			case "queue":
				r.Settings = map[string]string{"plugin.queue.backend": `"redis"`}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func render(name string, d templateData) ([]byte, error) {
	t, err := template.New(filepath.Base(name)).Funcs(template.FuncMap{
		"join": strings.Join,
	}).ParseFS(templateFS, name)
	if err != nil {
		return nil, fmt.Errorf("scaffold: template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return nil, fmt.Errorf("scaffold: template %s: %w", name, err)
	}
	return b.Bytes(), nil
}

// goVersion is the framework's go directive as "1.26".
func goVersion(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			parts := strings.Split(strings.TrimSpace(rest), ".")
			if len(parts) >= 2 {
				return parts[0] + "." + parts[1]
			}
			return strings.TrimSpace(rest)
		}
	}
	return "1.26"
}

// goMod writes the service's go.mod: the framework's go directive, a requirement
// on the framework replaced by the checkout, and the framework's own requirements
// at the framework's versions, so the build resolves exactly the module graph the
// framework was tested with and needs nothing new from the network.
func goMod(module string, frameworkMod []byte, frameworkDir string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\n", module)
	var goLine string
	var requires []string
	inRequire := false
	for _, line := range strings.Split(string(frameworkMod), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "go ") || strings.HasPrefix(t, "toolchain "):
			goLine += t + "\n"
		case t == "require (":
			inRequire = true
		case inRequire && t == ")":
			inRequire = false
		case inRequire && t != "" && !strings.HasPrefix(t, "//"):
			requires = append(requires, t)
		case strings.HasPrefix(t, "require "):
			requires = append(requires, strings.TrimPrefix(t, "require "))
		}
	}
	b.WriteString(goLine)
	fmt.Fprintf(&b, "\nrequire %s v0.0.0-00010101000000-000000000000\n", modulePath)
	if len(requires) > 0 {
		b.WriteString("\n// The framework's own requirements, at its versions.\nrequire (\n")
		for _, r := range requires {
			if !strings.Contains(r, "// indirect") {
				r += " // indirect"
			}
			b.WriteString("\t" + r + "\n")
		}
		b.WriteString(")\n")
	}
	fmt.Fprintf(&b, "\n// jfast is not published yet: build against the checkout `jfast new` came from.\nreplace %s => %s\n", modulePath, frameworkDir)
	return []byte(b.String())
}

// configFile generates jfast.toml from the [app] defaults and the chosen plugins'
// Config() values and doc comments.
func configFile(o Options, chosen []recipe) ([]byte, error) {
	w := &configWriter{docs: newDocs(o.Framework), set: map[string]string{
		"app.name":   tomltext.String(o.Name),
		"app.listen": tomltext.String(Listen),
	}}
	for k, v := range settings(o.Name, chosen) {
		w.set[k] = v
	}
	w.b.WriteString(`# jfast.toml: the configuration of ` + o.Name + `.
#
# Every key is listed with its default; the commented ones (#) take the default.
# The environment overrides the file with JFAST_<SECTION>_<KEY>, "__" between
# deeper levels (JFAST_APP_LISTEN, JFAST_DB_URL): for deploy keys (addresses,
# URLs, credentials) the environment wins; for shape keys (timeouts, limits) the
# file wins. "go run . config" prints the effective values and their sources;
# "go run . check" validates this file.
`)
	app := framework.DefaultAppConfig()
	w.table("app", reflect.ValueOf(app), nil)

	w.b.WriteString("\n[plugins]\n")
	w.comment(w.docs.field(reflect.TypeFor[framework.PluginsConfig](), "Enabled"), "Enabled", "enabled")
	w.b.WriteString("enabled = " + enabledList(chosen) + "\n")

	plugins := []framework.Plugin{&framework.Observability{}}
	for _, r := range chosen {
		plugins = append(plugins, o.Available[r.Name]())
	}
	for _, p := range plugins {
		crit := func() {
			w.b.WriteString("# critical: true lets this plugin's failure make /ready answer 503 (unavailable),\n# only for a dependency without which this replica is useless. Defaults to false.\n# critical = false\n")
		}
		cp, ok := p.(framework.Configurable)
		if !ok {
			fmt.Fprintf(&w.b, "\n[plugin.%s]\n", p.Name())
			crit()
			continue
		}
		v := reflect.ValueOf(cp.Config())
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("scaffold: plugin %s: Config() is a %s, not a pointer to a struct", p.Name(), v.Type())
		}
		w.table("plugin."+p.Name(), v.Elem(), func() {
			crit()
			w.b.WriteString("\n")
		})
	}
	return []byte(strings.TrimSpace(blankLines.ReplaceAllString(w.b.String(), "\n\n")) + "\n"), nil
}

var blankLines = regexp.MustCompile(`\n{3,}`)

func enabledList(chosen []recipe) string {
	names := []string{`"observability"`}
	for _, r := range chosen {
		names = append(names, fmt.Sprintf("%q", r.Name))
	}
	return "[" + strings.Join(names, ", ") + "]"
}
