package main

import (
	"context"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework/cli"
)

// cliImport is what a jfast service's main imports for its command line.
const cliImport = "github.com/jfastframework/jfast/framework/cli"

// isServiceMain reports whether dir holds a jfast service's main package: Go
// files of package main importing the framework's command line. The jfast
// command's own directory is not one (it imports the scaffold).
func isServiceMain(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	service := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil || f.Name.Name != "main" {
			return false
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == cliImport:
				service = true
			case strings.HasPrefix(path, "github.com/jfastframework/jfast/cmd/jfast/"):
				return false
			}
		}
	}
	return service
}

// serviceCheck builds the service whose main package is in dir and runs its
// own check with args (the jfast command line's, which the service's accepts:
// both are framework/cli), so the verdict is the service's, plugins compiled
// in included. It returns the check's exit status; a build that fails is
// status 1 with go build's messages.
func serviceCheck(ctx context.Context, dir string, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "jfast check: %s is a service's main package: running its own check, which knows what its main compiles in (go build, then check; --builtin checks with jfast's plugins instead)\n", dir)
	bin, err := os.MkdirTemp("", "jfast-check-")
	if err != nil {
		fmt.Fprintf(stderr, "jfast check: %v\n", err)
		return 1
	}
	defer os.RemoveAll(bin)
	exe := filepath.Join(bin, "service")
	build := exec.CommandContext(ctx, "go", "build", "-o", exe, ".")
	build.Dir, build.Stdout, build.Stderr = dir, stderr, stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(stderr, "jfast check: building the service in %s failed (%v); fix the build, or run jfast check --builtin\n", dir, err)
		return 1
	}
	check := exec.CommandContext(ctx, exe, args...)
	check.Dir, check.Stdout, check.Stderr = dir, stdout, stderr
	err = check.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	fmt.Fprintf(stderr, "jfast check: running the service's check: %v\n", err)
	return 1
}

// delegateCheck makes root's check run the service's own check when the
// working directory is a service's main package, unless --builtin is given.
func delegateCheck(root *cobra.Command, args []string) {
	for _, c := range root.Commands() {
		if c.Name() != "check" {
			continue
		}
		var builtinOnly bool
		c.Flags().BoolVar(&builtinOnly, "builtin", false, "check with jfast's built-in plugins, even in a service's directory (where jfast check runs the service's own check)")
		own := c.RunE
		c.RunE = func(cmd *cobra.Command, a []string) error {
			if dir, err := os.Getwd(); err == nil && !builtinOnly && isServiceMain(dir) {
				if code := serviceCheck(cmd.Context(), dir, args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					return &cli.ExitError{Code: code}
				}
				return nil
			}
			return own(cmd, a)
		}
	}
}
