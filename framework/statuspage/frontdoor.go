package statuspage

import (
	"fmt"
	"sort"
	"time"
)

// FrontDoor is what the front door's concurrency limit reads now
// ([app.overload]): the App fills it from its Limiter.
type FrontDoor struct {
	Limit, InFlight, Queued int
	// Baseline and Recent are the lowest and the last window mean
	// latency; CPUWait the last window's p99 wait for a CPU.
	Baseline, Recent, CPUWait time.Duration
	// Shed counts the requests turned away since start, by reason.
	Shed map[string]uint64
}

type frontDoorView struct {
	Limit, InFlight, Queued int
	Baseline, Recent        string
	CPUWait                 string
	Shed                    string // "queue_full 12, queue_timeout 3", or "none"
}

func frontDoorOf(f func() *FrontDoor) *frontDoorView {
	if f == nil {
		return nil
	}
	fd := f()
	if fd == nil {
		return nil
	}
	v := &frontDoorView{Limit: fd.Limit, InFlight: fd.InFlight, Queued: fd.Queued,
		Baseline: Millis(fd.Baseline), Recent: Millis(fd.Recent), CPUWait: Millis(fd.CPUWait), Shed: "none"}
	reasons := make([]string, 0, len(fd.Shed))
	for r, n := range fd.Shed {
		if n > 0 {
			reasons = append(reasons, r)
		}
	}
	sort.Strings(reasons)
	for i, r := range reasons {
		if i == 0 {
			v.Shed = ""
		} else {
			v.Shed += ", "
		}
		v.Shed += fmt.Sprintf("%s %d", r, fd.Shed[r])
	}
	return v
}

// Millis renders a latency in milliseconds (one decimal under 10 ms), or
// "—" when zero: the words of the status page's front door panel and of the
// drill report (drills), which the page shows too.
func Millis(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}
