package queue_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/queue"
)

// The killed-worker test re-executes this test binary as a worker process.
const (
	childEnv    = "JFAST_QUEUE_TEST_CHILD"     // the backend
	childDBEnv  = "JFAST_QUEUE_TEST_CHILD_DB"  // the private database
	childCfgEnv = "JFAST_QUEUE_TEST_CHILD_CFG" // the [plugin.queue] lines
)

// crashJob is the killed-worker test's payload: the handler appends a line to File.
type crashJob struct {
	File string `json:"file"`
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	fmt.Fprintln(f, line)
	f.Close()
}

// runChild is a worker process whose handler records its start and then works
// "forever": the parent kills it with SIGKILL mid-job.
func runChild() int {
	backend := os.Getenv(childEnv)
	q := queue.New()
	if err := queue.Handle(q, "crash", func(ctx context.Context, j crashJob) error {
		appendLine(j.File, fmt.Sprintf("start %d", os.Getpid()))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Hour):
			return nil
		}
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dep, depTOML := depPlugin(backend, "", "")
	toml := fmt.Sprintf("[app]\nlisten = \"127.0.0.1:0\"\n[plugins]\nenabled = [%q, \"queue\"]\n%s[plugin.queue]\nbackend = %q\n%s", dep.Name(), depTOML, backend, os.Getenv(childCfgEnv))
	app, err := framework.New(framework.Options{Plugins: []framework.Plugin{dep, q}, ConfigText: toml, Environ: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := app.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	select {} // until killed
}
