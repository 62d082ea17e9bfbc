//go:build !linux

package openloop

import "time"

// Burn uses about d of CPU time, by wall time where the thread's own CPU
// clock cannot be read.
func Burn(d time.Duration) { burnWall(d) }
