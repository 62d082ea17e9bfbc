package scaffold

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jfastframework/jfast/internal/tomltext"

	"github.com/jfastframework/jfast/framework"
)

// modulePath is the framework's module; package paths under it are read from the
// framework checkout for their doc comments.
const modulePath = "github.com/jfastframework/jfast"

// docs reads the doc comments of config struct fields from the framework's source.
type docs struct {
	root  string
	types map[string]map[string]string // "pkgpath.Type" → Go field name → doc
	read  map[string]bool              // package paths already parsed
}

func newDocs(root string) *docs {
	return &docs{root: root, types: map[string]map[string]string{}, read: map[string]bool{}}
}

// field returns the doc comment of t's field, or "".
func (d *docs) field(t reflect.Type, field string) string {
	pkg := t.PkgPath()
	if !d.read[pkg] {
		d.read[pkg] = true
		d.parse(pkg)
	}
	return d.types[pkg+"."+t.Name()][field]
}

func (d *docs) parse(pkg string) {
	rel, ok := strings.CutPrefix(pkg, modulePath)
	if !ok || d.root == "" {
		return
	}
	dir := filepath.Join(d.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			continue
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				fields := map[string]string{}
				for _, fl := range st.Fields.List {
					doc := fl.Doc.Text()
					if doc == "" {
						doc = fl.Comment.Text()
					}
					for _, n := range fl.Names {
						fields[n.Name] = doc
					}
				}
				d.types[pkg+"."+ts.Name.Name] = fields
			}
		}
	}
}

// configWriter writes jfast.toml: every key, commented out with its default and its
// doc, except the keys the service sets.
type configWriter struct {
	b    strings.Builder
	docs *docs
	set  map[string]string // full key → TOML value the generated file sets
}

// comment writes text as "# " lines, the Go field name at its start replaced by
// the key.
func (w *configWriter) comment(text, goName, key string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	if rest, ok := strings.CutPrefix(text, goName); ok && goName != "" && (rest == "" || rest[0] == ' ' || rest[0] == ':' || rest[0] == ',') {
		text = key + rest
	}
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			w.b.WriteString("#\n")
			continue
		}
		w.b.WriteString("# " + line + "\n")
	}
}

// table writes [path] and its keys. v holds the defaults.
func (w *configWriter) table(path string, v reflect.Value, extra func()) {
	fmt.Fprintf(&w.b, "\n[%s]\n", path)
	if extra != nil {
		extra()
	}
	w.fields(path, v, false)
}

type subTable struct {
	path, goName, name, doc string
	v                       reflect.Value
	commented               bool
	mapOf                   reflect.Type // element type for an empty map of tables
}

// fields writes the keys of struct v under path; nested tables follow the keys.
func (w *configWriter) fields(path string, v reflect.Value, commented bool) {
	t := v.Type()
	var subs []subTable
	first := true
	ck := w.conditional(path, v)
	for _, tf := range tomltext.Fields(t) {
		f, name := tf.Field, tf.Name
		if ck != nil && !ck.Applies(name) {
			continue // uncommented, the validation would refuse it
		}
		key := path + "." + name
		fv := v.FieldByIndex(tf.Index)
		doc := w.docs.field(tf.Owner, f.Name)
		switch {
		case tomltext.IsTable(f.Type):
			subs = append(subs, subTable{path: key, goName: f.Name, name: name, doc: doc, v: fv, commented: commented})
			continue
		case tomltext.IsMapOfTables(f.Type):
			names := w.entries(key)
			for _, k := range fv.MapKeys() {
				if !slices.Contains(names, k.String()) {
					names = append(names, k.String())
				}
			}
			sort.Strings(names)
			if len(names) == 0 {
				subs = append(subs, subTable{path: key, goName: f.Name, name: name, doc: doc, commented: true, mapOf: f.Type.Elem()})
			}
			for _, n := range names {
				elem := reflect.New(f.Type.Elem())
				if existing := fv.MapIndex(reflect.ValueOf(n)); existing.IsValid() {
					elem.Elem().Set(existing)
				} else if d, ok := elem.Interface().(framework.Defaulter); ok {
					d.SetDefaults()
				}
				subs = append(subs, subTable{path: key + "." + tomltext.Key(n), goName: f.Name, name: name, doc: doc, v: elem.Elem(), commented: commented})
			}
			continue
		case f.Type.Kind() == reflect.Map:
			subs = append(subs, subTable{path: key, goName: f.Name, name: name, doc: doc, v: fv, commented: true})
			continue
		}
		if !first {
			w.b.WriteString("\n")
		}
		first = false
		shown := tomltext.Value(fv, tomltext.String)
		if !fv.IsZero() || computedDefault(doc, shown) == "" {
			// A shared type's doc states its own default, which a plugin
			// may change (the auth plugin's breaker_failures is 1, not
			// resilience's 5): the line below shows the real one.
			doc = withoutWrongDefault(doc, shown)
		}
		w.comment(doc, f.Name, name)
		switch val, ok := w.set[key]; {
		case ok && !commented:
			fmt.Fprintf(&w.b, "%s = %s\n", name, val)
		case fv.IsZero() && computedDefault(doc, tomltext.Value(fv, tomltext.String)) != "":
			// The zero value stands for a default computed at boot
			// (key_prefix from app.name, a lease from request_timeout):
			// writing the zero would suggest a value that is not the default.
			fmt.Fprintf(&w.b, "# %s  (unset: %s)\n", name, computedDefault(doc, tomltext.Value(fv, tomltext.String)))
		default:
			fmt.Fprintf(&w.b, "# %s = %s\n", name, tomltext.Value(fv, tomltext.String))
		}
	}
	for _, s := range subs {
		w.b.WriteString("\n")
		w.comment(s.doc, s.goName, s.name)
		switch {
		case s.mapOf != nil:
			elem := reflect.New(s.mapOf)
			if d, ok := elem.Interface().(framework.Defaulter); ok {
				d.SetDefaults()
			}
			fmt.Fprintf(&w.b, "# [%s.<name>]\n", s.path)
			w.fields(s.path+".<name>", elem.Elem(), true)
		case s.v.Kind() == reflect.Map:
			fmt.Fprintf(&w.b, "# [%s]\n", s.path)
			for _, k := range tomltext.SortedKeys(s.v) {
				fmt.Fprintf(&w.b, "# %s = %s\n", tomltext.Key(k), tomltext.Value(s.v.MapIndex(reflect.ValueOf(k)), tomltext.String))
			}
		case s.commented:
			fmt.Fprintf(&w.b, "# [%s]\n", s.path)
			w.fields(s.path, s.v, true)
		default:
			fmt.Fprintf(&w.b, "[%s]\n", s.path)
			w.fields(s.path, s.v, false)
		}
	}
}

// conditional returns v as a framework.ConditionalKeys, or nil, judged with
// the values the generated file sets in its table (a disk's driver) in place
// of v's defaults.
func (w *configWriter) conditional(path string, v reflect.Value) framework.ConditionalKeys {
	if _, ok := v.Interface().(framework.ConditionalKeys); !ok {
		return nil
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	for _, tf := range tomltext.Fields(v.Type()) {
		f := c.FieldByIndex(tf.Index)
		if val, ok := w.set[path+"."+tf.Name]; ok && f.Kind() == reflect.String {
			if s, err := strconv.Unquote(val); err == nil {
				f.SetString(s)
			}
		}
	}
	return c.Interface().(framework.ConditionalKeys)
}

// entries lists the map entries the set keys name under key ("plugin.http.upstreams"
// → ["example"]).
func (w *configWriter) entries(key string) []string {
	var names []string
	for k := range w.set {
		rest, ok := strings.CutPrefix(k, key+".")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ".")
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

var defaultsTo = regexp.MustCompile(`Defaults to (.+?)\.(?:\s|$)`)

// computedDefault returns the doc comment's "Defaults to X" when X is not the zero
// value as written (zero), or "".
func computedDefault(doc, zero string) string {
	m := defaultsTo.FindStringSubmatch(strings.Join(strings.Fields(doc), " "))
	if m == nil {
		return ""
	}
	phrase := m[1]
	literal := strings.Trim(zero, `"`)
	for _, plain := range []string{zero, literal, "none", "nil", "no ", "0", "false", "empty", "off"} {
		if plain != "" && strings.HasPrefix(phrase, plain) {
			return ""
		}
	}
	if zero == `""` && (strings.HasPrefix(phrase, `""`) || phrase == "") {
		return ""
	}
	return phrase
}

var defaultSentence = regexp.MustCompile(`(?s)Defaults\s+to\s+(.+?)\.(\s|$)`)

// withoutWrongDefault returns doc without its "Defaults to X." sentences
// whose X is a value (a number, a duration, a boolean, a quoted string)
// other than shown, the default as jfast.toml writes it. A sentence whose X
// is not a value ("the app's name") is kept: nothing says it is wrong.
func withoutWrongDefault(doc, shown string) string {
	const cut = "\x00"
	out := defaultSentence.ReplaceAllStringFunc(doc, func(m string) string {
		sub := defaultSentence.FindStringSubmatch(m)
		if agrees, judged := sameDefault(sub[1], shown); !judged || agrees {
			return m
		}
		if sub[2] == " " {
			return cut // the space before it is the next sentence's
		}
		return cut + sub[2]
	})
	if out == doc {
		return doc
	}
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == cut {
			continue // the sentence was the whole line
		}
		lines = append(lines, strings.TrimRight(strings.ReplaceAll(line, cut, ""), " "))
	}
	return strings.Join(lines, "\n")
}

// sameDefault compares the value a "Defaults to" phrase begins with and
// shown; judged is false when the phrase does not begin with a value, or
// goes on to qualify it.
func sameDefault(phrase, shown string) (agrees, judged bool) {
	lit := strings.TrimRight(strings.Fields(phrase)[0], ",;:)")
	if strings.HasPrefix(phrase, `"`) {
		if end := strings.Index(phrase[1:], `"`); end >= 0 {
			lit = phrase[:end+2]
		}
	}
	plain := strings.Trim(shown, `"`)
	if lit == shown || lit == plain {
		return true, true
	}
	if rest := strings.TrimPrefix(phrase, lit); rest != "" && !strings.HasPrefix(rest, " (") && !strings.HasPrefix(rest, " /") && !strings.ContainsAny(rest[:1], ",;:)") {
		// More words qualify the value ("10 per CPU"): what they make of
		// it on this machine is not for a sentence to be judged on.
		return false, false
	}
	if d, err := time.ParseDuration(lit); err == nil {
		s, err := time.ParseDuration(plain)
		return err == nil && s == d, true
	}
	if f, err := strconv.ParseFloat(lit, 64); err == nil && strings.ContainsAny(lit[:1], "-.0123456789") {
		s, err := strconv.ParseFloat(shown, 64)
		return err == nil && s == f, true
	}
	if b, err := strconv.ParseBool(lit); err == nil && (lit == "true" || lit == "false") {
		s, err := strconv.ParseBool(shown)
		return err == nil && s == b, true
	}
	if strings.HasPrefix(lit, `"`) {
		return false, true
	}
	return false, false
}
