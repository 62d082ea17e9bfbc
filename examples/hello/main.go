// Command hello is the smallest jfast service: the observability plugin and one
// JSON route. Run it with `go run ./examples/hello`; it listens on app.listen
// (127.0.0.1:8000 unless JFAST_APP_LISTEN says otherwise).
package main

import (
	"github.com/jfastframework/jfast/framework/cli"
)

func main() {
	cli.Main(Options())
}
