// Command overload runs the overload benchmark of docs/performance.md: four
// front doors (bare chi, go-zero's adaptive shedder, failsafe-go's adaptive
// limiter, jfast) around one handler (2 ms of CPU, then 5 ms waiting on a
// simulated dependency), each in a process of its own pinned to one core,
// offered an open-loop load (a constant arrival rate) at 0.25×, 1×, 2× and
// 4× the capacity measured at the start of the run, the arms interleaved
// at every level. It prints the table, and writes it as JSON and the chart
// as PNG:
//
//	cd bench && go run ./cmd/overload -json ../docs/overload-bench.json -png ../docs/overload-bench.png
//
// Goodput is the 200s answered within the 500 ms objective per second;
// admitted latencies count from each request's scheduled send, so a server
// that falls behind cannot hide its queue. /ready is probed every 100 ms on
// a new connection, as an orchestrator does.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/jfastframework/jfast/bench/overload"
)

func main() {
	var (
		serve     = flag.String("serve", "", "serve this arm on -listen (the child processes)")
		listen    = flag.String("listen", "127.0.0.1:0", "address to serve on with -serve")
		cpu       = flag.Duration("cpu", 2*time.Millisecond, "CPU per request")
		wait      = flag.Duration("wait", 5*time.Millisecond, "simulated dependency wait per request")
		step      = flag.Duration("step", 5*time.Second, "length of each arm's run at each level")
		rounds    = flag.Int("rounds", 1, "times the whole sequence of levels runs")
		levelsArg = flag.String("levels", "0.25,1,2,4", "offered load as multiples of the measured capacity")
		pin       = flag.Bool("pin", true, "pin the servers to CPU 1 and the load generator to CPU 0 (taskset)")
		jsonOut   = flag.String("json", "", "write the results as JSON here")
		pngOut    = flag.String("png", "", "draw the chart here")
		armsArg   = flag.String("arms", strings.Join(overload.Arms, ","), "the arms to run")
		capacity  = flag.Float64("capacity", 0, "the capacity in req/s (0: measure the chi arm's)")
		gzCPU     = flag.Int64("gozero-cpu-threshold", 0, "go-zero's CPU threshold (0: its 900 scaled to the share of the cgroup's CPUs the server may use)")
	)
	flag.Parse()
	work := overload.Work{CPU: *cpu, Wait: *wait, GoZeroCPUThreshold: *gzCPU}
	if *serve != "" {
		if err := child(*serve, *listen, work); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var levels []float64
	for _, s := range strings.Split(*levelsArg, ",") {
		var f float64
		if _, err := fmt.Sscan(s, &f); err != nil || f <= 0 {
			fmt.Fprintf(os.Stderr, "-levels: %q is not a positive number\n", s)
			os.Exit(2)
		}
		levels = append(levels, f)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	run, err := parent(ctx, work, strings.Split(*armsArg, ","), *capacity, levels, *step, *rounds, *pin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(run.Markdown())
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(run, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if *pngOut != "" {
		if err := overload.Chart(run, *pngOut); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// child serves one arm and prints its address on stdout.
func child(arm, addr string, work overload.Work) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if work.GoZeroCPUThreshold == 0 {
		// go-zero reads CPU use as a share of every CPU its cgroup has; a
		// server pinned to one of them can never reach its default 900.
		work.GoZeroCPUThreshold = int64(900 * runtime.NumCPU() / cgroupCPUs())
	}
	fmt.Println(ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if path := os.Getenv("OVERLOAD_CPUPROFILE"); path != "" {
		f, err := os.Create(path + "." + arm)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("OVERLOAD_TRACE"); path != "" {
		// An execution trace of the server (go tool trace): where a
		// request's goroutine waited before the framework saw it.
		f, err := os.Create(path + "." + arm)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	return overload.Serve(ctx, arm, ln, work)
}

// cgroupCPUs is how many CPUs the machine has (go-zero's view without a
// quota): the online ones.
func cgroupCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		var lo, hi int
		if c, _ := fmt.Sscanf(part, "%d-%d", &lo, &hi); c == 2 {
			n += hi - lo + 1
		} else {
			n++
		}
	}
	return max(n, 1)
}

func parent(ctx context.Context, work overload.Work, arms []string, capacity float64, levels []float64, step time.Duration, rounds int, pin bool) (*overload.Run, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	_, err = exec.LookPath("taskset")
	pin = pin && err == nil && runtime.NumCPU() >= 2
	if pin {
		// Every thread of this process to CPU 0; the servers get CPU 1.
		if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", fmt.Sprint(os.Getpid())).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("taskset: %v: %s", err, out)
		}
	}
	addrs := map[string]string{}
	if capacity == 0 && !slices.Contains(arms, "chi") {
		arms = append(arms, "chi") // the capacity is the chi arm's
	}
	for _, arm := range arms {
		args := []string{self, "-serve", arm, "-cpu", work.CPU.String(), "-wait", work.Wait.String(), "-gozero-cpu-threshold", fmt.Sprint(work.GoZeroCPUThreshold)}
		if pin {
			args = append([]string{"taskset", "-c", "1"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		defer func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("arm %s did not start: %v", arm, err)
		}
		addrs[arm] = strings.TrimSpace(line)
	}
	return overload.Measure(ctx, overload.Setup{
		Addrs: addrs, Arms: arms, Capacity: capacity, Levels: levels, Step: step, Rounds: rounds, Work: work, Pinned: pin,
		Progress: os.Stderr,
	})
}
