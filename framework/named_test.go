package framework_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/jfasttest"
)

var petsTable = framework.NamedTable{
	Plugin: "zoo", Key: "pets", Noun: "pet", Nouns: "pets",
	Needs: "with its legs",
}

type pet struct {
	Legs int `koanf:"legs"`
}

// zoo is a plugin with a table of named entries, [plugin.zoo.pets.<name>].
type zoo struct {
	cfg struct {
		Pets map[string]pet `koanf:"pets"`
	}
}

func (z *zoo) Name() string { return "zoo" }
func (z *zoo) Config() any  { return &z.cfg }
func (z *zoo) Validate(v *framework.Validation) {
	framework.ValidateNamed(v, petsTable, z.cfg.Pets, func(p pet) []framework.ConfigError {
		var l framework.Problems
		if p.Legs <= 0 {
			l.Error("legs", fmt.Sprintf("must be greater than zero, got %d", p.Legs), "set legs in the file or in JFAST_ZOO_PETS__<NAME>__LEGS")
		}
		return l
	})
}

func TestValidateNamedChecksEveryEntryUnderItsKey(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{Plugins: []framework.Plugin{&zoo{}}, TOML: `
[plugins]
enabled = ["zoo"]
[plugin.zoo.pets.cat]
legs = 4
[plugin.zoo.pets.Dog]
legs = 4
[plugin.zoo.pets.snake]
legs = 0
`})
	if len(errs) != 2 {
		t.Fatalf("errors = %v, want 2", errs)
	}
	if e := errs["plugin.zoo.pets.Dog"]; e.Problem != "is not a valid pet name" || e.Fix != `rename it: a name is `+framework.NameRule+` ("dog" would do; it names the pet in metrics and in JFAST_ZOO_PETS__<NAME>__*)` {
		t.Errorf("bad name: %+v", e)
	}
	if e := errs["plugin.zoo.pets.snake.legs"]; e.Problem != "must be greater than zero, got 0" || e.Fix != "set legs in the file or in JFAST_ZOO_PETS__SNAKE__LEGS" {
		t.Errorf("entry problem: %+v (the fix names the entry's own variable)", e)
	}
}

// A name with "-" is part of its variables' names as written: the loader
// reads JFAST_ZOO_PETS__SEA-SNAKE__LEGS (see
// TestEnvironmentVariableWithADashIsRead).
func TestValidateNamedWritesANameWithADashIntoTheVariable(t *testing.T) {
	t.Parallel()
	errs := configErrors(t, jfasttest.Options{Plugins: []framework.Plugin{&zoo{}}, TOML: `
[plugins]
enabled = ["zoo"]
[plugin.zoo.pets.sea-snake]
legs = 0
`})
	if e := errs["plugin.zoo.pets.sea-snake.legs"]; e.Fix != "set legs in the file or in JFAST_ZOO_PETS__SEA-SNAKE__LEGS" {
		t.Errorf("fix %q", e.Fix)
	}
}

func TestNamedLookup(t *testing.T) {
	t.Parallel()
	var n framework.Named[int]
	_, err := n.Lookup(petsTable, "cat", false)
	if want := "zoo: the zoo plugin has not started; ask for pet 'cat' when mounting routes"; err == nil || err.Error() != want {
		t.Fatalf("before start: err = %v, want %q", err, want)
	}
	_, err = n.Lookup(petsTable, "cat", true)
	if want := "zoo: no pet 'cat' is configured: add a [plugin.zoo.pets.cat] table with its legs"; err == nil || err.Error() != want {
		t.Fatalf("none configured: err = %v, want %q", err, want)
	}

	n.Add("snake", 0)
	n.Add("cat", 4)
	n.Add("bird", 2)
	n.Add("cat", 3) // replaces, keeps one name
	if v, err := n.Lookup(petsTable, "cat", true); err != nil || v != 3 {
		t.Fatalf("cat = %d, %v; want 3", v, err)
	}
	if v, err := n.Lookup(petsTable, "cat", false); err != nil || v != 3 {
		t.Fatalf("an added name is found whatever started says: %d, %v", v, err)
	}
	_, err = n.Lookup(petsTable, "dog", true)
	if want := "zoo: no pet 'dog' is configured: add a [plugin.zoo.pets.dog] table with its legs; configured pets: bird, cat, snake"; err == nil || err.Error() != want {
		t.Fatalf("unknown: err = %v, want %q", err, want)
	}
	noNeeds := petsTable
	noNeeds.Needs = ""
	_, err = n.Lookup(noNeeds, "dog", true)
	if want := "zoo: no pet 'dog' is configured: add a [plugin.zoo.pets.dog] table; configured pets: bird, cat, snake"; err == nil || err.Error() != want {
		t.Fatalf("unknown, table needs nothing: err = %v, want %q", err, want)
	}

	if n.Len() != 3 {
		t.Fatalf("Len = %d, want 3", n.Len())
	}
	var names []string
	var legs []int
	for name, v := range n.All() {
		names = append(names, name)
		legs = append(legs, v)
	}
	if !slices.Equal(names, []string{"bird", "cat", "snake"}) || !slices.Equal(legs, []int{2, 3, 0}) {
		t.Fatalf("All = %v %v, want name order", names, legs)
	}
	if v, ok := n.Get("bird"); !ok || v != 2 {
		t.Fatalf("Get(bird) = %d, %v", v, ok)
	}
	if _, ok := n.Get("dog"); ok {
		t.Fatal("Get(dog) found a value")
	}
}

// BuildNamed builds the entries in name order and stops at the first error,
// returning what it built before it.
func TestBuildNamedInNameOrder(t *testing.T) {
	pets := map[string]pet{"rex": {Legs: 4}, "ada": {Legs: 2}, "kaa": {Legs: 0}, "tom": {Legs: 4}}
	var order []string
	build := func(name string, p pet) (int, error) {
		order = append(order, name)
		if p.Legs == 0 {
			return 0, errors.New(name + " has no legs")
		}
		return p.Legs, nil
	}
	built, err := framework.BuildNamed(pets, build)
	if err == nil || err.Error() != "kaa has no legs" {
		t.Fatalf("err = %v", err)
	}
	var names []string
	for n, legs := range built.All() {
		names = append(names, n)
		if legs != pets[n].Legs {
			t.Errorf("%s: %d legs, want %d", n, legs, pets[n].Legs)
		}
	}
	if !slices.Equal(order, []string{"ada", "kaa"}) || !slices.Equal(names, []string{"ada"}) {
		t.Fatalf("built %v in order %v, want ada then kaa, holding ada", names, order)
	}
	delete(pets, "kaa")
	order = nil
	built, err = framework.BuildNamed(pets, build)
	if err != nil || built.Len() != 3 || !slices.Equal(order, []string{"ada", "rex", "tom"}) {
		t.Fatalf("err = %v, %d built, order %v", err, built.Len(), order)
	}
}

// A name offered in a fix is one the rule accepts, or none is offered.
func TestNameLikeOffersOnlyValidNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 101)
	for _, tc := range []struct{ name, want string }{
		{"Billing", "billing"},
		{"-ab", "ab"},
		{"_ab", "ab"},
		{"__Ab-1", "ab-1"},
		{long, long[:100]},
		{"ünï", ""},
		{"Ün", ""},
		{"a.b", ""},
		{"mail jobs", ""},
		{"-", ""},
		{"", ""},
		{"billing", ""}, // valid already: nothing to offer
	} {
		got := framework.NameLike(tc.name)
		if got != tc.want {
			t.Errorf("NameLike(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if got != "" && !framework.ValidName(got) {
			t.Errorf("NameLike(%q) = %q, which the rule refuses", tc.name, got)
		}
	}
}

// Every table of named entries words a bad name alike: its noun, the rule,
// the name offered, and the entry's variables.
func TestBadNameIsWordedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		table     framework.NamedTable
		name, fix string
	}{
		{framework.NamedTable{Plugin: "http", Key: "upstreams", Noun: "upstream", DeployKey: "base_url"}, "Billing",
			`rename it: a name is ` + framework.NameRule + ` ("billing" would do; it names the upstream in metrics and in JFAST_HTTP_UPSTREAMS__<NAME>__BASE_URL)`},
		{framework.NamedTable{Plugin: "storage", Key: "disks", Noun: "disk"}, "ünï",
			`rename it: a name is ` + framework.NameRule + ` (it names the disk in metrics and in JFAST_STORAGE_DISKS__<NAME>__*)`},
	} {
		problem, fix := tc.table.BadName(tc.name)
		if problem != "is not a valid "+tc.table.Noun+" name" || fix != tc.fix {
			t.Errorf("%s %q: %q; %q", tc.table.Noun, tc.name, problem, fix)
		}
	}
}
