package framework

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// tomlError turns the parser's error into one that says where the mistake is:
// the file, line and column as its key, the line itself in the problem (with
// the value of a secret key masked), and a fix for the usual mistakes.
func tomlError(fileName string, text []byte, err error, quiet func(string) bool) ConfigError {
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	row, col, first := 0, 0, 0
	var de *gotoml.DecodeError
	if errors.As(err, &de) {
		row, col = de.Position()
	} else {
		// A key or table written twice is found after parsing, without a
		// position: find it again.
		row, col, first = duplicateAt(text)
	}
	if row == 0 {
		return ConfigError{Key: fileName, Problem: "is not valid TOML: " + msg, Fix: "correct the TOML syntax"}
	}
	problem := "is not valid TOML: " + msg
	if first > 0 {
		problem += fmt.Sprintf(" (first at line %d)", first)
	}
	if lines := strings.Split(string(text), "\n"); row <= len(lines) {
		problem += fmt.Sprintf("; line %d reads `%s`", row, maskLine(lines[:row], quiet))
	}
	fix := fmt.Sprintf("correct the TOML at line %d, column %d", row, col)
	switch {
	case first > 0:
		fix = fmt.Sprintf("write each key and table once: remove line %d or merge it with line %d", row, first)
	case strings.Contains(msg, "new lines"), strings.Contains(msg, "unterminated"):
		fix = fmt.Sprintf("close the string on line %d with the quote it opened with", row)
	}
	return ConfigError{Key: fmt.Sprintf("%s:%d:%d", fileName, row, col), Problem: problem, Fix: fix}
}

// duplicateAt finds the first key or table defined a second time in text: the
// line and column of the second definition and the line of the first, or
// zeros.
func duplicateAt(text []byte) (row, col, first int) {
	var p unstable.Parser
	p.Reset(text)
	seen := map[string]int{} // full key (or "[table]") → line
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		var path []string
		var at unstable.Range
		for it := e.Key(); it.Next(); {
			if len(path) == 0 {
				at = it.Node().Raw
			}
			path = append(path, string(it.Node().Data))
		}
		if len(path) == 0 {
			continue
		}
		var id string
		switch e.Kind {
		case unstable.Table:
			table = path
			id = "[" + strings.Join(path, "\x00")
		case unstable.ArrayTable:
			// Each [[x]] starts a new element: its keys may repeat.
			table = path
			for k := range seen {
				if strings.HasPrefix(k, strings.Join(path, "\x00")) {
					delete(seen, k)
				}
			}
			continue
		case unstable.KeyValue:
			id = strings.Join(append(slices.Clone(table), path...), "\x00")
		default:
			continue
		}
		line := p.Shape(at).Start.Line
		if f, ok := seen[id]; ok {
			return line, p.Shape(at).Start.Column, f
		}
		seen[id] = line
	}
	return 0, 0, 0
}

// maskLine returns the last of lines (the file up to the line of a syntax
// error), trimmed, with the value of a `key = value` line hidden when its key
// holds a secret or a deploy value (quiet, given the full key: the table is
// the last [header] above it) or names a secret ([IsSecretKey]); other lines
// go through [MaskSecrets]. The file did not parse, so the table is found by
// its header lines alone.
func maskLine(lines []string, quiet func(string) bool) string {
	line := strings.TrimSpace(lines[len(lines)-1])
	k, _, ok := strings.Cut(line, "=")
	if !ok {
		return MaskSecrets(line)
	}
	key := strings.Trim(strings.TrimSpace(k), `"'`)
	full := key
	for i := len(lines) - 2; i >= 0; i-- {
		h := strings.TrimSpace(lines[i])
		if strings.HasPrefix(h, "[") {
			table, _, _ := strings.Cut(strings.Trim(h, "[] \t"), "]")
			full = strings.Trim(strings.TrimSpace(table), `"'`) + "." + key
			break
		}
	}
	if IsSecretKey(key) || (quiet != nil && quiet(full)) {
		return strings.TrimRight(k, " ") + " = ***"
	}
	return MaskSecrets(line)
}
