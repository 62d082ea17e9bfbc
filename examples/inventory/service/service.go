package service

import (
	"github.com/go-chi/chi/v5"

	"github.com/jfastframework/jfast/examples/inventory/shoppb"
	"github.com/jfastframework/jfast/framework"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
)

// Options is inventory as its main compiles it, serving store; tests start
// the same thing with a store of their own.
func Options(store *Store) framework.Options {
	return framework.Options{
		Plugins: []framework.Plugin{jgrpc.New()},
		Routes:  Routes(store),
	}
}

// Routes registers shop.Inventory on the grpc plugin's server, serving
// store: a configuration without [plugin.grpc.server] listen fails the boot,
// naming the key.
func Routes(store *Store) func(*framework.App, chi.Router) error {
	return func(app *framework.App, _ chi.Router) error {
		srv, err := jgrpc.Server(app)
		if err != nil {
			return err
		}
		shoppb.RegisterInventoryServer(srv, &inventory{store: store, log: app.Logger()})
		return nil
	}
}
