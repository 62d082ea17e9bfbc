package framework_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/jfastframework/jfast/framework"
)

// TestUnclosedArrayIsReportedWhereItOpens: an array left open is reported
// at its `[`, whatever the parser ran into after it (an element without a
// comma, the next table, a key, the end of the file); an error inside an
// array that is closed, or on the open array's own line, stays where the
// parser found it.
func TestUnclosedArrayIsReportedWhereItOpens(t *testing.T) {
	t.Parallel()
	const open = "[app]\nname = \"x\"\n\n[plugins]\nenabled = [\"observability\","
	const unclosed = "the array opened on line 5, column 11 is not closed ("
	for _, tc := range []struct{ name, text, key, problem, fix string }{
		{"then a table", open + "\n[plugin.db]\nurl = \"postgres://db/x\"\n", "config:5:11",
			unclosed, "close the array that line 5 opens with ]"},
		{"then a key", open + "\nx = 1\n", "config:5:11", unclosed, "close the array that line 5 opens with ]"},
		{"then the end of the file", open + "\n", "config:5:11", unclosed, "close the array that line 5 opens with ]"},
		{"then the end of the file, no newline", open, "config:5:11", unclosed, "close the array that line 5 opens with ]"},
		{"then blank lines and a comment", open + " # the first\n\n\n", "config:5:11", unclosed, "close the array that line 5 opens with ]"},
		{"then an element without a comma", open + "\n  \"db\"\n\n[plugin.db]\n", "config:5:11", unclosed, "close the array that line 5 opens with ]"},
		{"then a table of arrays", open + "\n[[plugin.db.tenants]]\n", "config:5:11", unclosed, "close the array that line 5 opens with ]"},
		{"nested, the inner one open", "[plugins]\nenabled = [\"a\", [\"b\",\n[app]\n", "config:2:11",
			"the array opened on line 2, column 11 is not closed", "close the array that line 2 opens with ]"},
		{"brackets in a string", "[plugins]\nenabled = [\"[x]\", 'y]'\n[app]\n", "config:2:11",
			"the array opened on line 2, column 11 is not closed", "close the array that line 2 opens with ]"},
		// Not an unclosed array: the error is the parser's, where it found it.
		{"a bad element of a closed array", "[plugins]\nenabled = [\n  \"observability\",\n  db,\n]\n", "config:4:",
			"line 4 reads `db,`", "correct the TOML at line 4"},
		{"an element without a comma on the open array's line", "[plugins]\nenabled = [\"a\" \"b\"\n[app]\n", "config:2:",
			"array elements must be separated by commas", "correct the TOML at line 2"},
		{"a table header after a closed array", "[plugins]\nenabled = [\"observability\"]\n[app\n", "config:3:",
			"line 3 reads `[app`", "correct the TOML at line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := framework.New(framework.Options{ConfigText: tc.text, Environ: []string{}, LogOutput: io.Discard})
			var errs framework.ConfigErrors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("error %v, want one configuration error", err)
			}
			e := errs[0]
			keyOK := e.Key == tc.key || strings.HasSuffix(tc.key, ":") && strings.HasPrefix(e.Key, tc.key)
			if !keyOK || !strings.Contains(e.Problem, tc.problem) || !strings.Contains(e.Fix, tc.fix) {
				t.Fatalf("got %v\nwant %s: ...%s...; fix: ...%s...", e, tc.key, tc.problem, tc.fix)
			}
		})
	}
}
