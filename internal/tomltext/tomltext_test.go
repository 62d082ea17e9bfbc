package tomltext

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"
)

func TestValuesParseBackAsTOML(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    any
		want string
	}{
		{"a \"quoted\"\tline\n", `"a \"quoted\"\tline\n"`},
		{90 * time.Second, `"1m30s"`},
		{2 * time.Hour, `"2h"`},
		{250 * time.Millisecond, `"250ms"`},
		{true, "true"},
		{int64(-3), "-3"},
		{uint8(7), "7"},
		{0.5, "0.5"},
		{2.0, "2.0"},
		{[]string{"a", "b"}, `["a", "b"]`},
		{netip.MustParseAddr("127.0.0.1"), `"127.0.0.1"`},
	}
	for _, c := range cases {
		got := Value(reflect.ValueOf(c.v), String)
		if got != c.want {
			t.Errorf("Value(%#v) = %s, want %s", c.v, got, c.want)
		}
		var doc map[string]any
		if err := toml.Unmarshal([]byte("k = "+got), &doc); err != nil {
			t.Errorf("Value(%#v) = %s is not TOML: %v", c.v, got, err)
		}
	}
	if got := Value(reflect.ValueOf("hunter2"), func(string) string { return `"***"` }); got != `"***"` {
		t.Errorf("the text hook was not used: %s", got)
	}
	if got := Path("plugin.http.upstreams.my service.base_url"); got != `plugin.http.upstreams."my service".base_url` {
		t.Errorf("Path = %s", got)
	}
}
