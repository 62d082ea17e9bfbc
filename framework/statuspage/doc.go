// Package statuspage is the live status page a jfast service serves on its
// admin listener at /status: for every plugin its /ready verdict and detail,
// and for every dependency it holds the breaker (state, the transitions of
// the last 15 minutes, consecutive failures, window failure rate), the retry
// budget (retries allowed and refused per minute), the bulkhead (in flight,
// waiting), calls against attempts and p50/p99 latency; the queue's depth and
// dead letters; the last drill table.
//
// It reads what /ready and /metrics read: the readiness aggregator, the
// [resilience.Registry] of the App's breakers, budgets and bulkheads, and the
// Prometheus registry. Between requests it keeps one thing: a reading of the
// dependencies' traffic metrics every 10 s for 5 minutes, taken on the calls'
// own path ([resilience.Registry.OnTick]) whether or not anyone looks, so the
// first look shows the last minutes; [Handler.Close] stops them.
//
// The page is an html/template with its assets embedded; charts are SVG
// drawn on the server. It works with JavaScript off (a snapshot); with
// JavaScript, it fetches the live part again every second and swaps it in.
// See docs/status.md.
//
// # Example
//
// The framework mounts it on app.admin_listen; a service does not call it.
//
//	h := statuspage.New(statuspage.Source{
//		Service:   "orders",
//		Ready:     aggregator.Run,
//		Registry:  app.Resilience(),
//		Metrics:   app.Metrics(),
//	})
//	r.Mount("/status", h)
package statuspage
