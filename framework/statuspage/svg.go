package statuspage

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
)

// The charts are SVG drawn here, on the server: the page needs no chart
// library, no build step and no JavaScript to show them (a snapshot with
// JavaScript off has them too), and each is a few hundred bytes. Only
// numbers and fixed words go into them; html/template escapes the rest of
// the page.

// chartWidth is the user-space width of every chart: one unit per second of
// the 15-minute span.
const chartWidth = 900

var stateColour = map[resilience.State]string{
	resilience.StateClosed:   "#1a7f37",
	resilience.StateOpen:     "#cf222e",
	resilience.StateHalfOpen: "#bf8700",
}

// timeline draws a breaker's states over the last [resilience.HistorySpan]:
// a bar coloured by state (green closed, red open, amber half-open) from
// initial through every transition to now, grey before the breaker was
// created.
func timeline(created time.Time, initial, current resilience.State, ts []resilience.Transition, now time.Time) template.HTML {
	start := now.Add(-resilience.HistorySpan)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(start)) / float64(resilience.HistorySpan) * chartWidth
		return min(max(f, 0), chartWidth)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="breaker-timeline" viewBox="0 0 %d 18" preserveAspectRatio="none" role="img">`, chartWidth)
	seg := func(from, to float64, s resilience.State) {
		w := to - from
		if w <= 0 {
			w = 1 // a state that lasted no time still shows as a line
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="0" width="%.1f" height="18" fill="%s"><title>%s</title></rect>`, from, w, stateColour[s], stateText(s))
	}
	at, state := 0.0, initial
	if created.After(start) {
		at = x(created)
		fmt.Fprintf(&b, `<rect x="0" y="0" width="%.1f" height="18" fill="#eaeef2"><title>not yet created</title></rect>`, at)
	}
	for _, t := range ts {
		seg(at, x(t.At), state)
		at, state = x(t.At), t.To
	}
	if len(ts) == 0 {
		state = current
	}
	seg(at, chartWidth, state)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// retryChart draws a budget's retries per minute: one bar per minute,
// allowed (blue) under refused (red), scaled to the busiest minute.
func retryChart(ms []resilience.RetryMinute) template.HTML {
	top := 1
	for _, m := range ms {
		top = max(top, m.Allowed+m.Refused)
	}
	const h = 40.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="retry-chart" viewBox="0 0 %d %.0f" preserveAspectRatio="none" role="img">`, chartWidth, h)
	w := float64(chartWidth) / float64(max(len(ms), 1))
	for i, m := range ms {
		x := float64(i) * w
		ah := float64(m.Allowed) / float64(top) * h
		rh := float64(m.Refused) / float64(top) * h
		title := fmt.Sprintf("%s: %d allowed, %d refused", m.Start.UTC().Format("15:04"), m.Allowed, m.Refused)
		fmt.Fprintf(&b, `<g><title>%s</title><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#0969da"/><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#cf222e"/></g>`,
			title, x+1, h-ah, w-2, ah, x+1, h-ah-rh, w-2, rh)
	}
	fmt.Fprintf(&b, `<line x1="0" y1="%.0f" x2="%d" y2="%.0f" stroke="#d0d7de"/></svg>`, h-0.5, chartWidth, h-0.5)
	return template.HTML(b.String())
}
