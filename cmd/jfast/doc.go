// Command jfast is jfast's command line. It writes new services and checks and
// explains a jfast.toml without building the service:
//
//	jfast new orders --module github.com/acme/orders --plugins http,db
//	jfast check --config jfast.toml     # 0 valid, 1 invalid (every error listed), 2 usage
//	jfast config --config jfast.toml    # the effective configuration and each value's source
//	jfast version
//
// It carries the same service commands every jfast service has (package
// framework/cli) and the drill command (package drills), with every built-in
// plugin compiled in. docs/cli.md describes each command.
package main
