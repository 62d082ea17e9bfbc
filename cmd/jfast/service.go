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
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jfastframework/jfast/framework/cli"
)

// cliImport is what a jfast service's main imports for its command line.
const cliImport = "github.com/jfastframework/jfast/framework/cli"

// frameworkModule is the framework's module path, which a service's go.mod requires.
const frameworkModule = "github.com/jfastframework/jfast"

// isServiceMain reports whether dir holds a jfast service's main package: Go
// files of package main importing the framework's command line. The jfast
// command's own directory is not one (it imports the scaffold).
//
// A Go file that does not parse (an empty new file, a syntax error before its
// package clause) is an error when dir still looks like a service (another
// file is such a main, or go.mod requires jfast): its verdict is the
// service's, which a file that does not parse cannot build, never jfast's own.
func isServiceMain(dir string) (bool, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	service := false
	var broken []error
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			broken = append(broken, err)
			continue
		}
		if f.Name.Name != "main" {
			return false, nil
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == cliImport:
				service = true
			case strings.HasPrefix(path, "github.com/jfastframework/jfast/cmd/jfast/"):
				return false, nil
			}
		}
	}
	if len(broken) > 0 && (service || requiresJfast(dir)) {
		return false, fmt.Errorf("%s looks like a jfast service's directory, but a Go file does not parse, so neither the service's check nor its build can run: %w; fix the file (or remove it), or run jfast check --builtin",
			dir, errors.Join(broken...))
	}
	return service, nil
}

// requiresJfast reports whether dir's go.mod requires (or replaces) the
// framework's module, as a service's does.
func requiresJfast(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] != "module" && slices.Contains(fields, frameworkModule) {
			return true
		}
	}
	return false
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
			dir, err := os.Getwd()
			if err != nil || builtinOnly {
				return own(cmd, a)
			}
			service, err := isServiceMain(dir)
			if err != nil {
				return &cli.ExitError{Code: 1, Err: fmt.Errorf("jfast check: %w", err)}
			}
			if service {
				if code := serviceCheck(cmd.Context(), dir, args, cmd.OutOrStdout(), cmd.ErrOrStderr()); code != 0 {
					return &cli.ExitError{Code: code}
				}
				return nil
			}
			return own(cmd, a)
		}
	}
}
