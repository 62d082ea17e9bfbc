// Package roster is the one list of jfast's own plugins. The framework names the
// import to add from it when a service enables a plugin it did not compile in;
// the jfast binary compiles in every plugin on it (cmd/jfast/plugins.go, checked
// by a test) in its order; jfast new offers, in its order, those it has an example
// for; and a test in package plugins fails while a directory under plugins/ is
// missing from it.
//
// A new plugin joins the roster by adding its name to [Names], where it should
// appear in lists, and its constructor to cmd/jfast/plugins.go; docs/framework.md
// ("Adding a plugin") has the whole list of steps.
package roster

import "slices"

// Names are jfast's plugins in the order help texts, `jfast version` and the
// scaffold's [plugins] enabled list them. Every name but observability (part of
// package framework) is a package under plugins/ of the same name.
var Names = []string{
	"observability",
	"http",
	"db",
	"cache",
	"auth",
	"storage",
	"queue",
	"mail",
	"telemetry",
	"idempotency",
	"channels",
	"grpc",
	"gateway",
	"llm",
}

// Module is jfast's module path.
const Module = "github.com/jfastframework/jfast"

// Import returns the import path of the plugin called name.
func Import(name string) string {
	if name == "observability" {
		return Module + "/framework"
	}
	return Module + "/plugins/" + name
}

// Has reports whether name is one of jfast's plugins.
func Has(name string) bool { return slices.Contains(Names, name) }
