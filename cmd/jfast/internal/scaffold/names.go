package scaffold

import (
	"errors"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/module"
)

var nameRule = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// CheckName validates a service name: lower-case letters, digits and single
// dashes, starting with a letter, at most 63 characters, and not a name Windows
// gives to a device (con, aux, nul, com1, ...): the service's directory and
// binary are named after it. A name that is also the module path (no --module)
// must pass [CheckModulePath] as well: [Check] asks both.
func CheckName(name string) error {
	if !nameRule.MatchString(name) || strings.HasSuffix(name, "-") || strings.Contains(name, "--") {
		return fmt.Errorf("invalid service name %q: use lower-case letters, digits and single dashes, starting with a letter (at most 63 characters), e.g. \"orders\" or \"billing-api\"", name)
	}
	// Past nameRule, the only import path rule a name can break is Windows'.
	if err := goRefuses(name); err != nil {
		return fmt.Errorf("invalid service name %q: %v (the service's directory and binary are named after it); choose another, e.g. %q", name, err, name+"-svc")
	}
	return nil
}

var moduleElem = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

// CheckModulePath validates a Go module path the way `go mod init` and then
// `go build` and `go test` in the service would: slash-separated elements of
// letters, digits and ._~-, no element starting or ending with a dot, the first
// element lower case, none that Windows refuses (con, aux, a short name such as
// acme~1), no major version suffix but /v2 and up, and not a path the go command
// keeps for itself (see [reservedProblem]). A first element without a dot (a
// bare "orders") is allowed: the go command builds such a main module, as long as
// no standard library package has its path.
func CheckModulePath(path string) error {
	if why := modulePathProblem(path); why != "" {
		return fmt.Errorf("invalid module path %q: %s (e.g. \"github.com/acme/orders\")", path, why)
	}
	return nil
}

// Check validates a service's name and its module path: module, or, when
// module is empty, the name, which is then the module path too.
func Check(name, module string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if module != "" {
		return CheckModulePath(module)
	}
	if why := modulePathProblem(name); why != "" {
		return fmt.Errorf("invalid service name %q: without --module it is the module path too, and %s; choose another name, e.g. %q, or pass a module path, e.g. --module example.com/acme/%s", name, why, name+"-svc", name)
	}
	return nil
}

// modulePathProblem says what is wrong with path as a module path, or "".
func modulePathProblem(path string) string {
	if path == "" {
		return "it is empty"
	}
	if strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") {
		return "it starts or ends with a slash"
	}
	for i, elem := range strings.Split(path, "/") {
		switch {
		case elem == "":
			return "it has an empty element (//)"
		case !moduleElem.MatchString(elem):
			return fmt.Sprintf("element %q has a character outside letters, digits and ._~-", elem)
		case strings.HasPrefix(elem, ".") || strings.HasSuffix(elem, "."):
			return fmt.Sprintf("element %q starts or ends with a dot", elem)
		case i == 0 && strings.ToLower(elem) != elem:
			return "its first element must be lower case"
		}
	}
	if err := goRefuses(path); err != nil {
		return err.Error()
	}
	if _, _, ok := module.SplitPathVersion(path); !ok {
		if strings.HasPrefix(path, "gopkg.in/") {
			return "go mod init refuses it: a module path beginning with gopkg.in/ must end in a major version suffix .vN"
		}
		return "go mod init refuses it: a major version suffix must be /vN, and only for v2 or later"
	}
	if why := reservedProblem(path); why != "" {
		return why
	}
	if path == modulePath || strings.HasPrefix(path, modulePath+"/") {
		return "it is inside the framework's own module"
	}
	return ""
}

// goRefuses is the go command's own check of an import path
// (golang.org/x/mod/module.CheckImportPath, which go mod init and the loading
// of go.mod run), with its reason.
func goRefuses(path string) error {
	var bad *module.InvalidPathError
	if err := module.CheckImportPath(path); errors.As(err, &bad) {
		return fmt.Errorf("the go command refuses it: %w", bad.Err)
	} else if err != nil {
		return err
	}
	return nil
}

// metaPackages are the package patterns of the go command (go help packages),
// which it never reads as an import path: a module with one of these paths
// cannot be built or tested.
var metaPackages = []string{"std", "cmd", "all", "tool", "work"}

// reservedProblem says why the go command refuses path as the module path of a
// service whose main package is at its root, or "": a package pattern; "go" and
// "toolchain", the module paths it keeps for the Go toolchain; "main", which a
// test cannot import; and the path of a standard library package, whose imports
// would then be ambiguous.
func reservedProblem(path string) string {
	switch {
	case slices.Contains(metaPackages, path):
		return fmt.Sprintf("the go command reads %q as a pattern (%s), never as a package", path, strings.Join(metaPackages, ", "))
	case path == "go" || path == "toolchain":
		return fmt.Sprintf("the go command keeps the module path %q for the Go toolchain", path)
	case path == "main":
		return `the go command cannot import a package whose path is "main", so go test fails`
	case stdPackage(path):
		return fmt.Sprintf("%q is also a package of Go's standard library, so every import of it would be ambiguous", path)
	}
	return ""
}

// stdPackage reports whether path, whose first element has no dot, is a package
// of the standard library of the Go this binary was built with (build.Default's
// GOROOT): a directory of GOROOT/src with a .go file in it, as the go command
// decides (an empty parent such as "internal" is not one). Without a GOROOT
// (a -trimpath build) it says false.
func stdPackage(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	if build.Default.GOROOT == "" || strings.Contains(first, ".") {
		return false
	}
	entries, err := os.ReadDir(filepath.Join(build.Default.GOROOT, "src", filepath.FromSlash(path)))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".go")
	})
}
