package framework_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// The one name rule, as a table: what every named table (upstreams, shared
// clients, gateway routes, providers, disks, queues) accepts, and the dotted
// rule of channels.
func TestNameRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		valid, dotted bool
	}{
		{"billing", true, true},
		{"bench-q_1", true, true},
		{"0day", true, true},
		{"a", true, true},
		{strings.Repeat("a", 100), true, true},
		{strings.Repeat("a", 101), false, false},
		{"order.paid", false, true},
		{"price.changed.v2", false, true},
		{"", false, false},
		{"-a", false, false},
		{"_a", false, false},
		{"a.-b", false, false},
		{".a", false, false},
		{"a.", false, false},
		{"a..b", false, false},
		{"Billing", false, false},
		{"order.Paid", false, false},
		{"a:b", false, false},
		{"a b", false, false},
		{"a/b", false, false},
		{"é", false, false},
	} {
		if got := framework.ValidName(c.name); got != c.valid {
			t.Errorf("ValidName(%q) = %v, want %v", c.name, got, c.valid)
		}
		if got := framework.ValidDottedName(c.name); got != c.dotted {
			t.Errorf("ValidDottedName(%q) = %v, want %v", c.name, got, c.dotted)
		}
	}
}

// Every byte, first and later, against the rules written as regexps.
func TestNameRulesMatchTheirRegexps(t *testing.T) {
	t.Parallel()
	name := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,99}$`)
	dotted := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*$`)
	var names []string
	for c := range 256 {
		names = append(names, string([]byte{byte(c)}), string([]byte{'a', byte(c)}), string([]byte{'a', byte(c), 'b'}), string([]byte{'a', '.', byte(c)}))
	}
	for _, n := range names {
		if got, want := framework.ValidName(n), name.MatchString(n); got != want {
			t.Errorf("ValidName(%q) = %v, the rule says %v", n, got, want)
		}
		if got, want := framework.ValidDottedName(n), dotted.MatchString(n) && len(n) <= 100; got != want {
			t.Errorf("ValidDottedName(%q) = %v, the rule says %v", n, got, want)
		}
	}
}
