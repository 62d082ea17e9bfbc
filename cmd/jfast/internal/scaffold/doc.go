// Package scaffold writes a new jfast service: the files `jfast new` creates.
//
// The service it writes builds and passes its own tests at once: go.mod requires
// the framework (with a replace to the checkout the CLI was built from while jfast
// is not published) and pins the framework's own dependency versions, go.sum is the
// framework's, and every chosen plugin gets one example route, written the way the
// plugin's package documentation recommends, with a test that runs it through
// jfasttest.
//
// jfast.toml is generated, not hand-written: every key of [app] and of each chosen
// plugin's table is present, commented out, with its default taken from the
// plugin's Config() value and its explanation taken from the Go doc comment of the
// config struct's field (read from the framework's source).
package scaffold
