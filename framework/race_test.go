//go:build race

package framework

// raceEnabled is true under -race, whose instrumentation adds allocations.
const raceEnabled = true
