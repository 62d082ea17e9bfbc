// Package devconfig lets an example's binary run from any directory: its
// jfast.toml is compiled in and used only when no configuration was named.
package devconfig

import (
	"os"
	"strings"
)

// Fallback returns embedded when the command line names no --config, JFAST_CONFIG
// is unset and the working directory has no jfast.toml; otherwise "", so the
// framework reads the named file as usual.
func Fallback(embedded string) string {
	for _, a := range os.Args[1:] {
		if a == "--config" || strings.HasPrefix(a, "--config=") {
			return ""
		}
	}
	if os.Getenv("JFAST_CONFIG") != "" {
		return ""
	}
	if _, err := os.Stat("jfast.toml"); err == nil {
		return ""
	}
	return embedded
}
