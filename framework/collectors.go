package framework

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterOrReuse registers *c in reg. When reg already holds a collector
// equal to it (prometheus.AlreadyRegisteredError: same name, help and
// labels, registered by another client of the same registry), *c becomes
// that collector, so both count into the one set of series, and the error is
// nil. Any other refusal is returned and *c is left as it was.
//
// Use it where several clients built one after another share one Registerer
// (the upstream tables of the http, grpc and llm plugins); a plugin whose
// collectors are made once per App registers them with reg.Register, so a
// second registration stays the error it is.
func RegisterOrReuse[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			*c = existing
		}
		return nil
	}
	return err
}
