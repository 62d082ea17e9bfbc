// Package problem renders errors as RFC 9457 problem details
// (application/problem+json), the one error body every jfast service sends.
//
// A [Problem] is both an error a handler can return and the body it renders
// as. Handlers build one with a constructor ([NotFound], [Conflict],
// [Unprocessable], …); plugins return errors that implement [Renderer] (such
// as [DependencyError]) so the framework renders them without a switch over
// error types. [WriteError] decides in one place how any error is answered:
//
//   - a *Problem, or an error whose chain holds one or a [Renderer], renders
//     as itself;
//   - context.DeadlineExceeded (the request deadline ran out) is a 503;
//   - anything else is a 500 whose body says nothing about the cause: the
//     cause is kept in [Problem.Err] for the log only.
//
// The body has the members type, title, status, detail, instance and
// request_id, in that order, followed by extension members sorted by name
// ("dependency", "errors", "retry_after", "upstream", …). Extensions never
// replace a standard member.
//
// # Example
//
//	func getInvoice(w http.ResponseWriter, r *http.Request) error {
//		inv, ok := invoices[chi.URLParam(r, "id")]
//		if !ok {
//			return problem.NotFound("no invoice for this order")
//		}
//		return json.NewEncoder(w).Encode(inv)
//	}
//
// answers
//
//	HTTP/1.1 404 Not Found
//	Content-Type: application/problem+json
//
//	{"type":"about:blank","title":"Not Found","status":404,
//	 "detail":"no invoice for this order","instance":"/invoices/42",
//	 "request_id":"5f0c…"}
package problem
