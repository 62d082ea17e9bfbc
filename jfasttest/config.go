package jfasttest

import (
	"errors"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// ConfigErrors builds (does not start) the App of o and returns its
// configuration errors — none when the configuration is accepted — failing the
// test when the build fails for another reason: the one step of every
// boot-validation test.
//
//	errs := jfasttest.ConfigErrors(t, jfasttest.Options{TOML: toml, Plugins: plugins})
//	if e, ok := errs.For("plugin.db.pool_size"); !ok || !strings.Contains(e.Problem, "greater than zero") { ... }
func ConfigErrors(t testing.TB, o Options) Errors {
	t.Helper()
	_, err := New(t, o)
	if err == nil {
		return nil
	}
	var errs framework.ConfigErrors
	if !errors.As(err, &errs) {
		t.Fatalf("jfasttest: boot error is %T, not framework.ConfigErrors: %v", err, err)
	}
	return Errors(errs)
}

// Errors is a list of configuration errors with lookups by key.
type Errors framework.ConfigErrors

// For returns the first error about key (the full key path) and whether there
// is one.
func (es Errors) For(key string) (framework.ConfigError, bool) {
	for _, e := range es {
		if e.Key == key {
			return e, true
		}
	}
	return framework.ConfigError{}, false
}

// Has reports whether an error about key mentions every one of words (in its
// problem or its fix).
func (es Errors) Has(key string, words ...string) bool {
	for _, e := range es {
		if e.Key != key {
			continue
		}
		text := e.Problem + " " + e.Fix
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(text, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// Error prints every error, one a line.
func (es Errors) Error() string { return framework.ConfigErrors(es).Error() }

// Only fails the test unless es holds exactly one error, about key, with a
// fix, and returns it: the assertion of a boot-validation table whose every
// row breaks one rule.
func (es Errors) Only(t testing.TB, key string) framework.ConfigError {
	t.Helper()
	if len(es) != 1 || es[0].Key != key {
		t.Fatalf("configuration errors:\n%v\nwant exactly one, for %s", es, key)
	}
	if es[0].Fix == "" {
		t.Fatalf("%s: %q names no fix", key, es[0].Error())
	}
	return es[0]
}
