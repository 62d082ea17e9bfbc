//go:build race

package requestid_test

// raceEnabled is true under -race, whose instrumentation adds allocations.
const raceEnabled = true
