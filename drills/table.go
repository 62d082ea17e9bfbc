package drills

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework/statuspage"
)

// ms renders d in milliseconds, or "—" when zero, as the status page does.
var ms = statuspage.Millis

var tableHeader = []string{"dependency", "fault", "status", "first answer", "paid a deadline", "slowest", "answered fast p50 / max", "/ready (slowest)", "recovered in", "result"}

func (r Result) row() []string {
	switch {
	case r.Skipped != "":
		return []string{r.Dependency, r.Fault, "—", "—", "—", "—", "—", "—", "—", "SKIP: " + r.Skipped}
	}
	out := "ok"
	if r.Err != nil {
		out = "FAIL: " + r.Err.Error()
	}
	status := "—"
	if r.Status != 0 {
		status = fmt.Sprint(r.Status)
	}
	return []string{r.Dependency, r.Fault, status, ms(r.FirstAnswer), fmt.Sprint(r.Paid), ms(r.Slowest),
		ms(r.AnsweredP50) + " / " + ms(r.AnsweredMax), readyCell(r), ms(r.Recover), out}
}

// readyCell is the verdict and, when measured, the slowest /ready answer.
func readyCell(r Result) string {
	if r.Ready == "" || r.ReadyMax == 0 {
		return orDash(r.Ready)
	}
	return r.Ready + " (≤ " + ms(r.ReadyMax) + ")"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// Markdown renders the results as a Markdown table.
func Markdown(results []Result) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(tableHeader, " | ") + " |\n|")
	for range tableHeader {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range results {
		cells := r.row()
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// Text renders the results as an aligned plain-text table.
func Text(results []Result) string {
	rows := [][]string{tableHeader}
	for _, r := range results {
		rows = append(rows, r.row())
	}
	width := make([]int, len(tableHeader))
	for _, row := range rows {
		for i, c := range row[:len(row)-1] {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, c := range row {
			if i == len(row)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", width[i]-len([]rune(c))+2))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// ReportVar names the file the drill table is written to as Markdown.
const ReportVar = "JFAST_DRILL_REPORT"

// WriteReport prints the table to out and writes it as Markdown, with the
// date and the machine's load, to $JFAST_DRILL_REPORT or, when that is not
// set, to jfast-drills.md in the temporary directory (replaced on every run).
// It returns the path.
func WriteReport(out io.Writer, results []Result, note string) (string, error) {
	fmt.Fprintf(out, "\ndrills (%s):\n%s", note, Text(results))
	path := os.Getenv(ReportVar)
	if path == "" {
		path = filepath.Join(os.TempDir(), "jfast-drills.md")
	}
	load, _ := os.ReadFile("/proc/loadavg")
	md := fmt.Sprintf("Measured %s UTC, %s; load average %s.\n\n%s", time.Now().UTC().Format("2006-01-02 15:04"), note,
		strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "), Markdown(results))
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(out, "drill table written to %s (set %s to choose the path)\n", path, ReportVar)
	return path, nil
}
