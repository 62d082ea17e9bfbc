package overload

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jfastframework/jfast/internal/openloop"
)

// Setup is one run of the benchmark.
type Setup struct {
	Addrs    map[string]string // arm → its server's host:port
	Arms     []string          // the arms to run, of Arms
	Capacity float64           // req/s; 0 measures the chi arm's
	Levels   []float64         // offered load, as multiples of the capacity
	Step     time.Duration     // each arm's run at each level
	Rounds   int
	Work     Work
	Pinned   bool
	Progress io.Writer
}

// Run is what a run measured.
type Run struct {
	When     time.Time
	LoadAvg  string // /proc/loadavg at the start and at the end
	Pinned   bool
	CPU      time.Duration
	Wait     time.Duration
	Capacity float64 // the chi arm's closed-loop throughput, req/s
	Steps    []Step
}

// Step is one arm at one level in one round.
type Step struct {
	Arm          string
	Level        float64
	Round        int
	Offered      float64
	Goodput      float64 // 200s within 500 ms, per second
	P50, P99     time.Duration
	ShedFraction float64
	Failed       int // neither a 200 nor a 503/429: timeouts, errors
	Sent         int
	ReadySlowest time.Duration
	ReadyOver    int // /ready probes slower than 100 ms (or failed)
	ReadyProbes  int
}

// readyBound is what an orchestrator's probe is held to here.
const readyBound = 100 * time.Millisecond

// Measure measures the capacity, then runs every level, each arm in turn
// (the order rotated from one level to the next), Rounds times.
func Measure(ctx context.Context, s Setup) (*Run, error) {
	progress := s.Progress
	if progress == nil {
		progress = io.Discard
	}
	run := &Run{When: time.Now().UTC(), LoadAvg: loadAvg(), Pinned: s.Pinned, CPU: s.Work.CPU, Wait: s.Work.Wait}
	arms := s.Arms
	if len(arms) == 0 {
		arms = Arms
	}
	for _, arm := range arms { // warm up: connections, code paths, the limits' baselines
		openloop.Run(ctx, openloop.Load{URL: "http://" + s.Addrs[arm] + "/work", Rate: 20, Duration: time.Second})
	}
	run.Capacity = s.Capacity
	if run.Capacity == 0 {
		run.Capacity = openloop.Saturate(ctx, "http://"+s.Addrs["chi"]+"/work", 16, 3*time.Second)
		fmt.Fprintf(progress, "capacity (chi, 16 closed loops): %.0f req/s\n", run.Capacity)
	}
	if run.Capacity < 1 {
		return nil, fmt.Errorf("overload: the chi arm served nothing")
	}
	for round := 1; round <= max(s.Rounds, 1); round++ {
		for li, level := range s.Levels {
			for i := range arms {
				arm := arms[(i+li+round)%len(arms)]
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				st := runStep(ctx, s, arm, level, run.Capacity)
				st.Round = round
				run.Steps = append(run.Steps, st)
				fmt.Fprintf(progress, "round %d %4.2f× %-11s goodput %6.0f/s (%3.0f%% of C) p50 %6.1f ms p99 %7.1f ms shed %4.1f%% failed %d /ready slowest %.1f ms\n",
					round, level, arm, st.Goodput, 100*st.Goodput/run.Capacity, ms(st.P50), ms(st.P99), 100*st.ShedFraction, st.Failed, ms(st.ReadySlowest))
				settle(s.Pinned, progress)
			}
		}
	}
	run.LoadAvg += " → " + loadAvg()
	return run, nil
}

func runStep(ctx context.Context, s Setup, arm string, level, capacity float64) Step {
	base := "http://" + s.Addrs[arm]
	pctx, stopProbe := context.WithCancel(ctx)
	probed := make(chan openloop.ProbeResult, 1)
	go func() { probed <- openloop.Probe(pctx, base+"/ready", 100*time.Millisecond, 2*time.Second, readyBound) }()
	res := openloop.Run(ctx, openloop.Load{URL: base + "/work", Rate: level * capacity, Duration: s.Step})
	stopProbe()
	pr := <-probed
	return Step{
		Arm: arm, Level: level, Offered: res.Offered, Goodput: res.Goodput(),
		P50: res.Percentile(50), P99: res.Percentile(99), ShedFraction: res.ShedFraction(),
		Failed: res.Failed, Sent: res.Sent,
		ReadySlowest: pr.Slowest, ReadyOver: pr.Over + pr.Failed, ReadyProbes: pr.N,
	}
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summary is an arm at a level over every round: the median of the rounds'
// figures.
type Summary struct {
	Arm               string
	Level             float64
	Goodput           float64
	P50, P99          time.Duration
	ShedFraction      float64
	Failed            int
	ReadySlowest      time.Duration
	ReadyOver, Probes int
}

// Summaries returns one Summary per arm and level, in table order.
func (r *Run) Summaries() []Summary {
	var out []Summary
	for _, level := range r.levels() {
		for _, arm := range Arms {
			var steps []Step
			for _, st := range r.Steps {
				if st.Arm == arm && st.Level == level {
					steps = append(steps, st)
				}
			}
			if len(steps) == 0 {
				continue
			}
			s := Summary{Arm: arm, Level: level}
			s.Goodput = median(steps, func(st Step) float64 { return st.Goodput })
			s.P50 = time.Duration(median(steps, func(st Step) float64 { return float64(st.P50) }))
			s.P99 = time.Duration(median(steps, func(st Step) float64 { return float64(st.P99) }))
			s.ShedFraction = median(steps, func(st Step) float64 { return st.ShedFraction })
			for _, st := range steps {
				s.Failed += st.Failed
				s.ReadySlowest = max(s.ReadySlowest, st.ReadySlowest)
				s.ReadyOver += st.ReadyOver
				s.Probes += st.ReadyProbes
			}
			out = append(out, s)
		}
	}
	return out
}

func (r *Run) levels() []float64 {
	var ls []float64
	for _, st := range r.Steps {
		found := false
		for _, l := range ls {
			found = found || l == st.Level
		}
		if !found {
			ls = append(ls, st.Level)
		}
	}
	return ls
}

func median(steps []Step, f func(Step) float64) float64 {
	vs := make([]float64, len(steps))
	for i, st := range steps {
		vs[i] = f(st)
	}
	for i := range vs {
		for j := i + 1; j < len(vs); j++ {
			if vs[j] < vs[i] {
				vs[i], vs[j] = vs[j], vs[i]
			}
		}
	}
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// Markdown renders the run as the table of docs/performance.md.
func (r *Run) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s UTC; load average %s; capacity C = %.0f req/s (chi, 16 closed loops); handler %s CPU + %s wait; servers %s.\n\n",
		r.When.Format("2006-01-02 15:04"), r.LoadAvg, r.Capacity, r.CPU, r.Wait, map[bool]string{true: "pinned to CPU 1, load generator to CPU 0", false: "not pinned"}[r.Pinned])
	b.WriteString("| offered | arm | goodput (% of C) | admitted p50 | admitted p99 | p99 vs own unloaded | shed | failed | /ready slowest (over 100 ms) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	sums := r.Summaries()
	unloaded := map[string]time.Duration{}
	if len(sums) > 0 {
		first := sums[0].Level
		for _, s := range sums {
			if s.Level == first {
				unloaded[s.Arm] = s.P99
			}
		}
	}
	for _, s := range sums {
		ratio := "—"
		if u := unloaded[s.Arm]; u > 0 && s.P99 > 0 {
			ratio = fmt.Sprintf("%.1f×", float64(s.P99)/float64(u))
		}
		fmt.Fprintf(&b, "| %.2g× | %s | %.0f/s (%.0f %%) | %.1f ms | %.1f ms | %s | %.1f %% | %d | %.1f ms (%d of %d) |\n",
			s.Level, s.Arm, s.Goodput, 100*s.Goodput/r.Capacity, ms(s.P50), ms(s.P99), ratio, 100*s.ShedFraction, s.Failed, ms(s.ReadySlowest), s.ReadyOver, s.Probes)
	}
	return b.String()
}

// settle waits until the servers' CPU is idle before the next step: an arm
// that does not drop the work of callers that gave up (chi, and the peers
// that queue) goes on burning it for seconds after its step, and the next
// arm, on the same CPU, would be measured against that backlog. Pinned, it
// reads CPU 1's busy share from /proc/stat every 200 ms until it is under
// 5 % (at most a minute); unpinned, the servers share the CPUs with the load
// generator and it waits a second.
func settle(pinned bool, progress io.Writer) {
	if !pinned {
		time.Sleep(time.Second)
		return
	}
	start := time.Now()
	prevBusy, prevTotal, ok := cpuTimes("cpu1")
	for ok && time.Since(start) < time.Minute {
		time.Sleep(200 * time.Millisecond)
		busy, total, ok2 := cpuTimes("cpu1")
		if !ok2 {
			break
		}
		if d := total - prevTotal; d > 0 && float64(busy-prevBusy)/float64(d) < 0.05 {
			if waited := time.Since(start); waited > time.Second {
				fmt.Fprintf(progress, "  (the servers' CPU was busy for %.1f s after the step)\n", waited.Seconds())
			}
			return
		}
		prevBusy, prevTotal = busy, total
	}
}

// cpuTimes returns one CPU's busy and total jiffies from /proc/stat.
func cpuTimes(cpu string) (busy, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != cpu {
			continue
		}
		for i, v := range f[1:] {
			var n uint64
			fmt.Sscan(v, &n)
			total += n
			if i != 3 && i != 4 { // idle, iowait
				busy += n
			}
		}
		return busy, total, true
	}
	return 0, 0, false
}
