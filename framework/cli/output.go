package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jfastframework/jfast/framework"
)

const (
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiBold  = "\x1b[1m"
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

func (s *Service) useColor(w io.Writer) bool { return useColor(s.color, s.opts.Environ, w) }

// useColor reports whether messages to w are coloured: --color always, or auto on a
// terminal when NO_COLOR is not set and TERM is not "dumb".
func useColor(flag string, environ []string, w io.Writer) bool {
	switch flag {
	case "always":
		return true
	case "never":
		return false
	}
	if environ == nil {
		environ = os.Environ()
	}
	if lookupEnv(environ, "NO_COLOR") != "" || lookupEnv(environ, "TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// writeConfigErrors prints one line per problem — where the file writes it
// (file:line:, when it does), key (with its variable, when the environment
// set it), rule, fix — then a count.
func writeConfigErrors(w io.Writer, errs framework.ConfigErrors, color bool) {
	for _, e := range errs {
		key, fix := e.KeyAndSource(), e.Fix
		if color {
			key = ansiBold + ansiRed + key + ansiReset
		}
		line := key + ": " + framework.MaskSecrets(e.Problem)
		if e.Line > 0 {
			line = fmt.Sprintf("%s:%d: %s", e.File, e.Line, line)
		}
		if fix != "" {
			if color {
				line += ansiDim + "; fix: " + ansiReset + fix
			} else {
				line += "; fix: " + fix
			}
		}
		fmt.Fprintln(w, line)
	}
	summary := fmt.Sprintf("%d configuration errors", len(errs))
	if len(errs) == 1 {
		summary = "1 configuration error"
	}
	if color {
		summary = ansiRed + summary + ansiReset
	}
	fmt.Fprintln(w, summary)
}
