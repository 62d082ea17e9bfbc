// Package requestid makes, validates and carries the request ID that ties a
// request's log lines, its problem+json body and its outbound calls together.
//
// The framework's outermost middleware accepts a sane inbound [Header] (see
// [Valid]) or makes one with [New], echoes it on the response and stores it in
// the request's context with [NewContext]. Everything downstream reads it back
// with [FromContext]: the problem writer puts it in "request_id", the outbound
// HTTP client forwards it, the logger adds it to each line.
//
// # Example
//
//	id := r.Header.Get(requestid.Header)
//	if !requestid.Valid(id) {
//		id = requestid.New()
//	}
//	w.Header().Set(requestid.Header, id)
//	r = r.WithContext(requestid.NewContext(r.Context(), id))
package requestid
