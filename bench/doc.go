// Package bench holds benchmarks and differential tests that compare
// framework/resilience with the libraries a Go service would otherwise use:
// github.com/sony/gobreaker/v2 and github.com/failsafe-go/failsafe-go. It is
// a separate module (with a replace to the framework) so the framework's
// go.mod gains no dependency; run it with
//
//	cd bench && go test -run '^$' -bench . -benchmem
//
// The results are tabled in docs/performance.md.
package bench
