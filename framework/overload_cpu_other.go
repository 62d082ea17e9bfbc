//go:build !unix

package framework

import "time"

// procCPU is the process's CPU use, which only unix systems give here.
type procCPU struct{ readings func() (time.Duration, bool) }

func newProcCPU() *procCPU { return nil }

func (*procCPU) busy() float64 { return 1 }
