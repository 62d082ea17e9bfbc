package scenarios_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/jfastframework/jfast/drills"
)

// results collects every scenario's measurements for the table TestMain prints.
var results struct {
	mu   sync.Mutex
	list []drills.Result
}

func record(r drills.Result) {
	results.mu.Lock()
	defer results.mu.Unlock()
	results.list = append(results.list, r)
}

// TestMain runs the scenarios, prints the drill table and writes it as Markdown
// (to $JFAST_DRILL_REPORT, or a temporary file), then checks for leaked
// goroutines.
func TestMain(m *testing.M) {
	code := m.Run()
	results.mu.Lock()
	list := results.list
	results.mu.Unlock()
	if len(list) > 0 {
		if _, err := drills.WriteReport(os.Stdout, list, "go test ./drills/..., shortened deadlines except the rows marked shipped defaults"); err != nil {
			fmt.Fprintln(os.Stderr, "drill report:", err)
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
