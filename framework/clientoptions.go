package framework

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jfastframework/jfast/framework/resilience"
)

// ClientMetricSet is a plugin's collectors for its outbound clients (the
// [ClientMetrics] it shares with every plugin, and its own series), made
// once by the plugin and shared by all its clients.
type ClientMetricSet interface {
	comparable
	// Register registers the collectors in reg, reusing those already
	// there ([RegisterOrReuse]).
	Register(reg prometheus.Registerer) error
}

// ClientOptions are the options an outbound client's constructor takes in
// every plugin that calls out: the clock of its policies, its logger, the
// registry its metrics go to and the metric set of its plugin. S is the
// plugin's metric set.
type ClientOptions[S ClientMetricSet] struct {
	Clock    resilience.Clock
	Logger   *slog.Logger
	Registry prometheus.Registerer // nil: the client counts, nothing exports
	Metrics  S                     // the plugin's set; zero for a set of the client's own
}

// Resolve fills what no option set: the real clock, a logger that discards,
// and, without the plugin's set, a set of the client's own from newSet,
// registered in Registry when there is one. client names the client in the
// error ("grpc: upstream 'billing'").
func (o *ClientOptions[S]) Resolve(client string, newSet func() S) error {
	o.Clock = cmp.Or(o.Clock, resilience.RealClock())
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	var none S
	if o.Metrics != none {
		return nil
	}
	o.Metrics = newSet()
	if o.Registry == nil {
		return nil
	}
	if err := o.Metrics.Register(o.Registry); err != nil {
		return fmt.Errorf("%s: registering metrics: %w", client, err)
	}
	return nil
}

// AppClientOptions returns what every client a plugin builds at Start shares:
// the App's clock and logger, and one metric set from newSet, registered in
// the App's registry. plugin names the plugin in the error.
func AppClientOptions[S ClientMetricSet](app *App, plugin string, newSet func() S) (ClientOptions[S], error) {
	o := ClientOptions[S]{Clock: app.Clock(), Logger: app.Logger(), Registry: app.Metrics()}
	if err := o.Resolve(plugin, newSet); err != nil {
		return ClientOptions[S]{}, err
	}
	return o, nil
}
