// Package http is the client a jfast service calls its sibling services with:
// one [ServiceClient] per upstream per process, with mandatory deadlines,
// retries only when they are safe and can help (within a retry budget and the
// call's deadline), a circuit breaker and a bulkhead per upstream, all from
// framework/resilience.
//
// Configure the upstreams in jfast.toml:
//
//	[plugins]
//	enabled = ["observability", "http"]
//
//	[plugin.http.upstreams.billing]
//	base_url = "http://billing:8010"
//	read_timeout = "5s"
//	attempts = 3
//
// and take the client once, when mounting routes:
//
//	func routes(app *framework.App, r chi.Router) error {
//		billing, err := http.Client(app, "billing")
//		if err != nil {
//			return err // unknown upstream: the boot fails naming it
//		}
//		r.Method(nethttp.MethodGet, "/orders/{id}", framework.Handler(func(w nethttp.ResponseWriter, r *nethttp.Request) error {
//			resp, err := billing.Get(r.Context(), "/invoices/"+chi.URLParam(r, "id"))
//			if err != nil {
//				return err // an UpstreamError: 503 problem+json naming "billing"
//			}
//			if resp.StatusCode == nethttp.StatusNotFound {
//				return problem.NotFound("no invoice for this order")
//			}
//			var invoice Invoice
//			if err := http.DecodeJSON(resp, &invoice); err != nil {
//				return err
//			}
//			return framework.JSON(w, nethttp.StatusOK, invoice)
//		}))
//		return nil
//	}
//
// A call returns the response the upstream sent, whatever its status, with
// its body already read; only a call that got no response returns an error:
// [UpstreamTimeout], [UpstreamUnavailable], [CircuitOpen] or [BulkheadFull],
// each an [UpstreamError] (errors.As) that renders as 503. A response whose
// body is over max_response_bytes (10 MiB) is not read past the limit and
// fails the call with [ResponseTooLarge], an UpstreamError that renders as 502.
//
// Outside a service (a script, a test) build a client directly with
// [NewClient] and Close it when done.
//
// An SDK or a reverse proxy that builds its own requests takes the same
// policies as an http.RoundTripper or *http.Client: [ServiceClient.Transport],
// [ServiceClient.HTTPClient], or at boot [Transport] and [HTTPClient]; a plugin
// that cannot import this package finds them through
// framework.HTTPTransports. Their responses stream: the call stays in flight
// until the body is read or closed.
//
// The telemetry seam is [TransportWrapper] (every attempt's RoundTrip) and
// [CallObserver] (every call), added with [Plugin.AddTransportWrapper] and
// [Plugin.ObserveCalls] before the plugin starts, or [WithTransportWrapper]
// and [WithCallObserver] in NewClient.
//
// docs/http.md explains what is retried and why, the budget, the breaker,
// the bulkhead, what travels with a call, every setting and what is tested.
package http
