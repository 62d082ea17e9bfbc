package statuspage

import (
	"os"
	"path/filepath"
	"strings"
)

// The last drill: `jfast drill --report FILE` writes its table as Markdown.
// A service whose app.drill_report names that file shows the table, read
// when the page is rendered (a drill runs from outside the service, so the
// file is the one place both sides know). A missing file shows nothing.

type drillView struct {
	File, Modified string
	Header         []string
	Rows           [][]string
}

// drillMax bounds what is read of a report: a drill table is a few KiB.
const drillMax = 256 << 10

func readDrill(path string) *drillView {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() > drillMax {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	v := &drillView{File: filepath.Base(path), Modified: st.ModTime().UTC().Format("2006-01-02 15:04 UTC")}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := splitRow(line)
		switch {
		case v.Header == nil:
			v.Header = cells
		case isRule(cells):
		default:
			v.Rows = append(v.Rows, cells)
		}
	}
	if v.Header == nil {
		return nil
	}
	return v
}

// splitRow splits a Markdown table row on the pipes that are not escaped.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func isRule(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}
