//go:build !linux

package resilience

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
