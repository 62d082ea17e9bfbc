//go:build !race

package requestid_test

const raceEnabled = false
