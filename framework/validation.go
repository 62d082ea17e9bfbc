package framework

import (
	"fmt"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// ConfigError is one problem in the configuration: the full key, what is wrong and
// how to fix it.
type ConfigError struct {
	Key     string // full key path, e.g. "plugin.http.upstreams.billing.read_timeout"
	Problem string // what is wrong, e.g. "must be a positive duration, got 0s"
	Fix     string // what to do about it
	// File and Line say where the configuration file writes Key (or, for a
	// key it lacks, the table the key belongs in), when the value came from
	// a file; Line is 0 otherwise (the environment, a default, or
	// Options.ConfigText, which has no file to point into).
	File string
	Line int
	// EnvVar names the variable that set Key's value, when the environment
	// did: it says where the value comes from, as File and Line do for a
	// file's. An error about a table the environment alone wrote names each
	// of its variables, comma-separated. It is "" otherwise.
	EnvVar string
}

// Error returns "file:line: key: problem; fix: fix", without "file:line: "
// when Line is 0, and with the variable after the key when the environment
// set the value: "key (JFAST_...): problem; fix: fix".
func (e ConfigError) Error() string {
	s := e.KeyAndSource() + ": " + e.Problem
	if e.Line > 0 {
		s = fmt.Sprintf("%s:%d: %s", e.File, e.Line, s)
	}
	if e.Fix == "" {
		return s
	}
	return s + "; fix: " + e.Fix
}

// KeyAndSource returns Key, followed by the variable that set its value in
// parentheses when the environment did: "app.request_timeout
// (JFAST_APP_REQUEST_TIMEOUT)".
func (e ConfigError) KeyAndSource() string {
	if e.EnvVar == "" {
		return e.Key
	}
	return e.Key + " (" + e.EnvVar + ")"
}

// ConfigErrors is every problem found in a configuration, reported together so one
// boot attempt shows all of them.
type ConfigErrors []ConfigError

func (es ConfigErrors) Error() string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	if len(es) == 1 {
		b.WriteString("1 configuration error")
	} else {
		fmt.Fprintf(&b, "%d configuration errors", len(es))
	}
	return b.String()
}

// Validation collects a plugin's configuration errors. Keys given to it are relative
// to the plugin's table; errors carry the full path.
type Validation struct {
	prefix string
	app    *AppConfig
	errs   *ConfigErrors
	set    map[string]string // full key → source, for keys the file or environment set
	// undecided collects the rules that depend on what main compiled in when
	// the plugins are stand-ins (Options.StandIn); nil otherwise.
	undecided *ConfigErrors
	// entry is the name of the table entry the keys belong to (Entry), written
	// into the JFAST_…__<NAME>__… variables the fixes name; "" outside one.
	entry string
	// critical is the plugin's [plugin.X] critical.
	critical bool
	// enabled is [plugins] enabled, the names compiled in.
	enabled map[string]bool
	// compiled is every plugin compiled in, by name, their tables bound
	// and resolved, for RequirePlugin to ask a Provider.
	compiled map[string]Plugin
	// listens collects the plugins' listeners (Listens).
	listens *[]listenAddr
}

// App returns the validated [app] table, for rules that depend on it (production).
func (v *Validation) App() AppConfig { return *v.app }

// Production reports whether app.env is "production".
func (v *Validation) Production() bool { return v.app.Production() }

// Key returns the full key path of a key relative to the table being validated.
func (v *Validation) Key(key string) string {
	if key == "" {
		return v.prefix
	}
	return v.prefix + "." + key
}

// Critical reports whether the plugin is declared critical ([plugin.X]
// critical = true).
func (v *Validation) Critical() bool { return v.critical }

// RefuseCritical refuses critical = true for a plugin whose check reports
// other services (the breakers of its upstreams): a sibling's outage must
// leave this replica in rotation, degraded. Declared critical, every replica
// would see the same sibling down and leave rotation together, turning one
// outage into two.
func (v *Validation) RefuseCritical() {
	if v.critical {
		v.Error("critical", "cannot be true: this plugin's check reports other services' breakers, and a sibling's outage must not take this replica out of rotation (every replica sees the same sibling down, so all would leave together)",
			"remove it: an open or half-open breaker leaves /ready degraded (200), and the calls to that upstream fail fast with a 503 naming it")
	}
}

// RequirePlugin records an error at key unless plugin name is enabled and
// offers what key chose runs on (the queue's backend "postgres" on the db
// plugin's main pool): a [Provider] whose table leaves it out is refused too,
// with the provider's own problem and fix. uses says what runs on the plugin,
// in those words; otherwise is the fix that keeps the plugin out ("set
// [plugin.queue] backend = \"redis\""). Which plugins are enabled, and what
// their tables hold, is the file's to say, so the rule is refused with the
// rest of the configuration, by check as by the boot, not at Start.
func (v *Validation) RequirePlugin(key, name, uses, otherwise string) {
	if !v.enabled[name] {
		v.Error(key, fmt.Sprintf("%s, and plugin %q is not enabled", uses, name),
			fmt.Sprintf("add %q to [plugins] enabled, or %s", name, otherwise))
		return
	}
	if p, ok := v.compiled[name].(Provider); ok {
		if problem, fix := p.Lacks(); problem != "" {
			v.Error(key, uses+", and "+problem, fix+", or "+otherwise)
		}
	}
}

// Listens records that the plugin listens on addr, the value of key
// (relative to the table), as the grpc plugin's server does: the boot, and
// check, refuse two listeners of one configuration (app.listen and
// app.admin_listen among them) that cannot share a port, naming both keys.
func (v *Validation) Listens(key, addr string) {
	if v.listens != nil && addr != "" {
		*v.listens = append(*v.listens, listenAddr{v.Key(key), addr})
	}
}

// IsSet reports whether the file or the environment set key (relative).
func (v *Validation) IsSet(key string) bool {
	_, ok := v.set[v.Key(key)]
	return ok
}

// Error records a problem with key (relative to the table) and how to fix it.
// The problem goes through [MaskSecrets]: a message that quotes a URL (a
// parser's error often does) never prints its password. A problem must still
// not quote the value of a secret key: only URLs and secret name=value pairs
// are found. The fix is the plugin's own text and is kept as written.
func (v *Validation) Error(key, problem, fix string) {
	if v.entry != "" {
		fix = nameVariable(fix, v.entry)
	}
	*v.errs = append(*v.errs, ConfigError{Key: v.Key(key), Problem: MaskSecrets(problem), Fix: fix})
}

// CompiledInError records a problem that depends on what the service's main
// compiled in (migrations passed to a plugin's constructor, services registered
// in code) rather than on the file alone. In the service's own binary it is an
// error like any other. When the plugins are stand-ins ([Options].StandIn: the
// jfast binary checking a file for a service it is not), it cannot be decided
// there: [App.Undecided] lists it and the check command says "cannot know
// here: run `<service> check`" instead of failing.
func (v *Validation) CompiledInError(key, problem, fix string) {
	if v.undecided != nil {
		*v.undecided = append(*v.undecided, ConfigError{Key: v.Key(key), Problem: MaskSecrets(problem), Fix: fix})
		return
	}
	v.Error(key, problem, fix)
}

// Deadline records an error unless d is a positive duration: jfast's deadlines
// cannot be switched off, so zero and negative are refused.
func (v *Validation) Deadline(key string, d time.Duration) { checkDeadline(v, key, d) }

// Positive records an error unless n > 0.
func (v *Validation) Positive(key string, n int) { checkPositive(v, key, n) }

// Span records an error unless d is a positive duration, for a span of time
// that is not a deadline (a window, a wait), suggesting example ("30s")
// ([resilience.Span]).
func (v *Validation) Span(key string, d time.Duration, example string) {
	resilience.Span(v, key, d, example)
}

// problemRecorder is what the checks shared by [Validation] and [Problems]
// record into.
type problemRecorder interface {
	Error(key, problem, fix string)
}

func checkDeadline(r problemRecorder, key string, d time.Duration) {
	if d <= 0 {
		r.Error(key, fmt.Sprintf("must be a positive duration, got %s", d), `set a duration such as "5s" or a number of seconds; deadlines cannot be switched off`)
	}
}

func checkPositive(r problemRecorder, key string, n int) {
	if n <= 0 {
		r.Error(key, fmt.Sprintf("must be greater than zero, got %d", n), "set a positive whole number")
	}
}

// Problems collects configuration problems keyed relative to one table, in
// the wording of [Validation]. It is the collector of a configuration type
// that is also checked outside an App (an upstream given to a client built in
// code); the plugin's Validate reports the same problems through
// [Validation.Error]. It satisfies resilience.Validator.
type Problems []ConfigError

// Error records a problem with key and how to fix it.
func (p *Problems) Error(key, problem, fix string) {
	*p = append(*p, ConfigError{Key: key, Problem: problem, Fix: fix})
}

// Deadline records an error unless d is a positive duration.
func (p *Problems) Deadline(key string, d time.Duration) { checkDeadline(p, key, d) }

// Positive records an error unless n > 0.
func (p *Problems) Positive(key string, n int) { checkPositive(p, key, n) }

// Sub returns a Validation for a nested table, e.g. v.Sub("upstreams.billing").
func (v *Validation) Sub(key string) *Validation {
	s := *v
	s.prefix = v.Key(key)
	return &s
}

// NameRule is the one rule for every name a plugin's configuration gives (an
// upstream, a shared client, a gateway route, a provider, a disk, a queue),
// as errors state it: ValidName checks it. Such a name labels metrics as
// written, is a path segment or part of a broker's key, and a JFAST_*
// variable, which names it in lower case, can address it.
const NameRule = "lowercase letters, digits, - and _, starting with a letter or digit, at most 100 characters"

// DottedNameRule is the rule for the names of events (the channels plugin's
// channels, such as "order.paid"): names of NameRule joined by '.'.
// ValidDottedName checks it.
const DottedNameRule = "letters, digits, -, _ and '.' in lower case, each part between dots starting with a letter or digit, at most 100 characters (as in order.paid)"

// maxNameLen is the longest name NameRule and DottedNameRule allow.
const maxNameLen = 100

// ValidName reports whether s follows NameRule.
func ValidName(s string) bool {
	return len(s) <= maxNameLen && validPart(s)
}

// ValidDottedName reports whether s follows DottedNameRule.
func ValidDottedName(s string) bool {
	if len(s) > maxNameLen {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if !validPart(part) {
			return false
		}
	}
	return true
}

// validPart reports whether s is one or more lowercase letters, digits, - and
// _, starting with a letter or digit.
func validPart(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// AgreesWithURL refuses key set to value when the connection string urlKey
// also sets it, as its parameter param, to another value (a pool size both
// in a database URL and in pool_size): neither may silently win. Unset, key
// takes the URL's value (see Resolution.FromURL). value and urlValue are of
// one type (an int, a time.Duration); durations are shown as TOML writes them.
func (v *Validation) AgreesWithURL(key string, value any, urlKey, param string, urlValue any) {
	if !v.IsSet(key) || value == urlValue {
		return
	}
	v.Error(key, fmt.Sprintf("is %s, and %s sets %s=%s: two values, and neither may silently win", shownValue(value), v.Key(urlKey), param, shownValue(urlValue)),
		fmt.Sprintf("keep one: remove %s from %s (or from %s), or remove %s (or %s)", param, v.Key(urlKey), envName(v.Key(urlKey)), v.Key(key), envName(v.Key(key))))
}

// URLsAgree refuses two connection strings, urlKey and otherKey, that set
// their parameter param to different values (a pool lifetime in both a
// database URL and a tenant template): neither may silently win. key is the
// setting they both set, which may take the value once they carry one
// between them. The error is urlKey's.
func (v *Validation) URLsAgree(urlKey string, value any, otherKey, param string, otherValue any, key string) {
	if value == otherValue {
		return
	}
	v.Error(urlKey, fmt.Sprintf("sets %s=%s, and %s sets %s=%s: two values of %s, and neither may silently win", param, shownValue(value), v.Key(otherKey), param, shownValue(otherValue), v.Key(key)),
		fmt.Sprintf("keep one: remove %s from one of them, or from both and set %s", param, v.Key(key)))
}

// shownValue is x as a message shows a config value.
func shownValue(x any) string {
	if d, ok := x.(time.Duration); ok {
		return FormatDuration(d)
	}
	return fmt.Sprint(x)
}
