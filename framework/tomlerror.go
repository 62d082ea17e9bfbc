package framework

import (
	"bytes"
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
func tomlError(fileName string, text []byte, err error, secret func(string) bool) ConfigError {
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	row, col, first := 0, 0, 0
	var de *gotoml.DecodeError
	if errors.As(err, &de) {
		row, col = de.Position()
	} else {
		// A key or table written twice is found after parsing, without a
		// position: find it again.
		row, col, first = duplicateAt(text)
		if row == 0 {
			// Another conflict found after parsing ("expected targets to
			// be a table, not a value"): the expression that makes it.
			row, col = conflictAt(text)
		}
	}
	if row == 0 {
		return ConfigError{Key: fileName, Problem: "is not valid TOML: " + msg, Fix: "correct the TOML syntax"}
	}
	problem := "is not valid TOML: " + msg
	// A missing `]` is found where the parser runs into what follows the
	// array, whatever that is (an element without a comma, the next table
	// read as an array, a key, the end of the file), and its message is
	// about that: the mistake is the array's, and is reported at its `[`.
	// An error on the array's own line, before the end of the file, is
	// that line's (an element without its comma).
	if l, c, ok := unclosedArray(text); ok && (l < row || l == row && atEnd(text, row, col)) {
		problem = fmt.Sprintf("is not valid TOML: the array opened on line %d, column %d is not closed (%s)", l, c, msg)
		lines := strings.Split(string(text), "\n")
		return ConfigError{
			Key:     fmt.Sprintf("%s:%d:%d", fileName, l, c),
			Problem: fmt.Sprintf("%s; line %d reads `%s`", problem, l, maskLine(lines[:l], secret)),
			Fix:     fmt.Sprintf("close the array that line %d opens with ]", l),
		}
	}
	if first > 0 {
		problem += fmt.Sprintf(" (first at line %d)", first)
	}
	if lines := strings.Split(string(text), "\n"); row <= len(lines) {
		problem += fmt.Sprintf("; line %d reads `%s`", row, maskLine(lines[:row], secret))
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
	seen := map[string]int{} // full key (or "[table]") → line
	var table []string
	eachExpression(text, func(e *unstable.Node, path []string, at unstable.Position, _ int) bool {
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
			return true
		case unstable.KeyValue:
			id = strings.Join(append(slices.Clone(table), path...), "\x00")
		default:
			return true
		}
		if f, ok := seen[id]; ok {
			row, col, first = at.Line, at.Column, f
			return false
		}
		seen[id] = at.Line
		return true
	})
	return row, col, first
}

// eachExpression calls fn with each expression of text that has a key (a
// key/value or a [table] header), in order, up to the first syntax error or
// until fn returns false: the node (valid during the call only), its key
// split as TOML splits it, and where the key starts (position and offset).
func eachExpression(text []byte, fn func(e *unstable.Node, path []string, at unstable.Position, offset int) bool) {
	var p unstable.Parser
	p.Reset(text)
	for p.NextExpression() {
		e := p.Expression()
		path, r := keyPath(e)
		if len(path) == 0 {
			continue
		}
		if !fn(e, path, p.Shape(r).Start, int(r.Offset)) {
			return
		}
	}
}

// conflictAt finds the expression (a key or a [table] header) at which text
// stops decoding, for an error the decoder reports without a position: the
// text up to each expression's line is decoded in turn, and the first that
// fails is the one. Files are short and this runs only for such an error.
func conflictAt(text []byte) (row, col int) {
	var starts []int // where each expression's line starts in text
	var at []unstable.Position
	eachExpression(text, func(_ *unstable.Node, _ []string, pos unstable.Position, offset int) bool {
		starts = append(starts, bytes.LastIndexByte(text[:offset], '\n')+1)
		at = append(at, pos)
		return true
	})
	var m map[string]any
	for i := range starts {
		end := len(text)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		if err := gotoml.Unmarshal(text[:end], &m); err != nil {
			return at[i].Line, at[i].Column
		}
	}
	return 0, 0
}

// maskLine returns the last of lines (the file up to the line of a syntax
// error), trimmed, with the value of a `key = value` line hidden when its key
// holds a secret (secret, given the full key: the table is the last [header]
// above it) or names one ([IsSecretKey]); other lines go through
// [MaskSecrets], which hides a URL's password. A listen address, a timeout or
// a plugin list is shown as written: it is what the reader must correct. The
// file did not parse, so the table is found by its header lines alone.
func maskLine(lines []string, secret func(string) bool) string {
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
	if IsSecretKey(key) || (secret != nil && secret(full)) {
		return strings.TrimRight(k, " ") + " = ***"
	}
	return MaskSecrets(line)
}

// keyLines maps each key and table the file writes to the line it is written
// on: "app.request_timeout" to its `request_timeout = ...` line, "plugin.db"
// to its [plugin.db] header, and the keys of an inline table to its line. It
// reads the file as TOML does (a header sets the table, dotted and quoted keys
// are split as TOML splits them), so a key is found where TOML finds it, not
// where its words happen to appear. A key with a quoted part holding "." is
// also found by the file's spelling (plugin.http.upstreams."a.b"), which is
// how errors name it. A file that does not parse yields what was read before
// the mistake.
func keyLines(text []byte) map[string]int {
	lines := map[string]int{}
	record := func(path, raw []string, line int, first bool) {
		for _, k := range []string{strings.Join(path, "."), spell(path, raw)} {
			if _, ok := lines[k]; !ok || !first {
				lines[k] = line
			}
		}
	}
	eachKey(text, func(path, raw []string, line int, table bool) { record(path, raw, line, table) })
	return lines
}

// quotedKeys maps the flat key, its quoted dots kept as [quotedDot], of
// every quoted part with "." of a key the file writes, and of every key up
// to such a part, to the file's spelling of it: `[plugin.http.upstreams."a.b"]`
// gives "plugin.http.upstreams.a\x00b" → `plugin.http.upstreams."a.b"`.
func quotedKeys(text []byte) map[string]string {
	spelled := map[string]string{}
	eachKey(text, func(path, raw []string, _ int, _ bool) {
		for i := range path {
			if strings.Contains(path[i], ".") {
				flat := make([]string, i+1)
				for j, p := range path[:i+1] {
					flat[j] = strings.ReplaceAll(p, ".", quotedDot)
				}
				spelled[strings.Join(flat, ".")] = spell(path[:i+1], raw[:i+1])
			}
		}
	})
	return spelled
}

// spell joins a key's parts as the file writes those holding "." (with
// their quotes) and as they are otherwise.
func spell(path, raw []string) string {
	parts := slices.Clone(path)
	for i, p := range path {
		if strings.Contains(p, ".") && i < len(raw) {
			parts[i] = raw[i]
		}
	}
	return strings.Join(parts, ".")
}

// eachKey calls fn with every table and key the file writes, the keys of
// inline tables included, in order: its full key split as TOML splits it,
// each part as written (quotes included), its line, and whether it is a
// table header.
func eachKey(text []byte, fn func(path, raw []string, line int, table bool)) {
	var table, tableRaw []string
	eachExpression(text, func(e *unstable.Node, path []string, at unstable.Position, _ int) bool {
		raw := rawParts(text, e)
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table, tableRaw = path, raw
			fn(path, raw, at.Line, true)
		case unstable.KeyValue:
			full := append(slices.Clone(table), path...)
			fullRaw := append(slices.Clone(tableRaw), raw...)
			fn(full, fullRaw, at.Line, false)
			inlineKeys(text, e.Value(), full, fullRaw, at.Line, fn)
		}
		return true
	})
}

// keyPath returns an expression's key, split, and where it starts.
func keyPath(e *unstable.Node) ([]string, unstable.Range) {
	var path []string
	var at unstable.Range
	for it := e.Key(); it.Next(); {
		if len(path) == 0 {
			at = it.Node().Raw
		}
		path = append(path, string(it.Node().Data))
	}
	return path, at
}

// rawParts returns the parts of an expression's key as the file writes
// them, quotes included.
func rawParts(text []byte, e *unstable.Node) []string {
	var raw []string
	for it := e.Key(); it.Next(); {
		r := it.Node().Raw
		raw = append(raw, string(text[r.Offset:r.Offset+r.Length]))
	}
	return raw
}

// inlineKeys calls fn with the keys of an inline table (`upstream = { a = 1 }`)
// at the line of the key holding it.
func inlineKeys(text []byte, v *unstable.Node, prefix, prefixRaw []string, line int, fn func(path, raw []string, line int, table bool)) {
	if v == nil || v.Kind != unstable.InlineTable {
		return
	}
	for it := v.Children(); it.Next(); {
		kv := it.Node()
		path, _ := keyPath(kv)
		if len(path) == 0 {
			continue
		}
		full := append(slices.Clone(prefix), path...)
		fullRaw := append(slices.Clone(prefixRaw), rawParts(text, kv)...)
		fn(full, fullRaw, line, false)
		inlineKeys(text, kv.Value(), full, fullRaw, line, fn)
	}
}

// lineOf returns the line of the file a configuration error is about: its
// key's, else the first line that writes a key below it (foo.bar = 1 for an
// error about foo, a dotted key; [plugin.grpc.upstreams.x] for an error about
// plugin.grpc, a table the file only names through its subtables), else the
// nearest table above it that the file writes (the table a missing key
// belongs in); 0 when the file writes none of them.
func lineOf(lines map[string]int, key string) int {
	if l, ok := lines[key]; ok {
		return l
	}
	// Written only through keys under it (foo.bar = 1, or subtables): the
	// first of those lines, before the table around it.
	first := 0
	for k, l := range lines {
		if strings.HasPrefix(k, key+".") && (first == 0 || l < first) {
			first = l
		}
	}
	if first != 0 {
		return first
	}
	for k := key; k != ""; {
		if l, ok := lines[k]; ok {
			return l
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return 0
}

// unclosedArray finds the array text leaves open: the line and column of
// the `[` of the outermost array still open at the end of the file, or ok
// false when every array is closed. Strings and comments are skipped; a `[`
// is an array only after a key's `=` or inside another array (elsewhere it
// starts a table header), so a header below an open array counts as an
// array inside it, opened and closed, and the open one stays open.
func unclosedArray(text []byte) (line, col int, ok bool) {
	type open struct{ line, col int }
	var stack []open
	inValue := false
	l, start := 1, 0 // the line, and where it starts in text
	for i := 0; i < len(text); i++ {
		switch ch := text[i]; {
		case ch == '\n':
			l, start = l+1, i+1
			if len(stack) == 0 {
				inValue = false
			}
		case ch == '#':
			for i+1 < len(text) && text[i+1] != '\n' {
				i++
			}
		case ch == '"' || ch == '\'':
			quote := text[i : i+1]
			if i+2 < len(text) && text[i+1] == ch && text[i+2] == ch {
				quote = text[i : i+3]
			}
			end := i + len(quote)
			for end < len(text) && !bytes.HasPrefix(text[end:], quote) {
				if text[end] == '\\' && ch == '"' {
					end++
				} else if text[end] == '\n' {
					if len(quote) == 1 {
						break // an unterminated string: the parser says so
					}
					l, start = l+1, end+1
				}
				end++
			}
			i = end + len(quote) - 1
		case ch == '=' && len(stack) == 0:
			inValue = true
		case ch == '[' && (inValue || len(stack) > 0):
			stack = append(stack, open{l, i - start + 1})
		case ch == ']' && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) == 0 {
		return 0, 0, false
	}
	return stack[0].line, stack[0].col, true
}

// atEnd reports whether line row, column col (1-based, where the parser
// stopped) is at the end of text, but for blanks.
func atEnd(text []byte, row, col int) bool {
	off := 0
	for l := 1; l < row; l++ {
		i := bytes.IndexByte(text[off:], '\n')
		if i < 0 {
			return true
		}
		off += i + 1
	}
	off += max(col-1, 0)
	return off >= len(text) || len(bytes.TrimSpace(text[off:])) == 0
}
