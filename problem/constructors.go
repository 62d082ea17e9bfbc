package problem

import (
	"net/http"
	"strings"
	"time"
)

// New returns a problem with the given status and detail; the title is the
// status text.
func New(status int, detail string) *Problem {
	return &Problem{Status: status, Detail: detail}
}

// BadRequest returns a 400: the request is malformed (bad JSON, a query
// parameter of the wrong type).
func BadRequest(detail string) *Problem { return New(http.StatusBadRequest, detail) }

// Unauthorized returns a 401: no credentials, or credentials that do not
// verify. Add a WWW-Authenticate header through Header.
func Unauthorized(detail string) *Problem { return New(http.StatusUnauthorized, detail) }

// Forbidden returns a 403: the caller is known but may not do this.
func Forbidden(detail string) *Problem { return New(http.StatusForbidden, detail) }

// NotFound returns a 404: the resource does not exist.
func NotFound(detail string) *Problem { return New(http.StatusNotFound, detail) }

// MethodNotAllowed returns a 405 whose Allow header lists allow.
func MethodNotAllowed(allow []string) *Problem {
	list := strings.Join(allow, ", ")
	p := New(http.StatusMethodNotAllowed, "the method is not allowed for this resource")
	if list != "" {
		p.Detail += "; allowed: " + list
	}
	p.Header = http.Header{"Allow": {list}}
	return p
}

// Conflict returns a 409: the request conflicts with the resource's current
// state (a duplicate, a stale version).
func Conflict(detail string) *Problem { return New(http.StatusConflict, detail) }

// ContentTooLarge returns a 413: the request body is larger than the route
// accepts. A handler rarely builds one: reading past the route's limit fails
// with *http.MaxBytesError, which [From] renders as this.
func ContentTooLarge(detail string) *Problem { return New(http.StatusRequestEntityTooLarge, detail) }

// UnsupportedMediaType returns a 415: the request body is in a format the
// route does not take (its Content-Type).
func UnsupportedMediaType(detail string) *Problem {
	return New(http.StatusUnsupportedMediaType, detail)
}

// FieldError is one invalid field of a request, rendered in the "errors"
// member of an [Unprocessable] problem.
type FieldError struct {
	// Field names the field as the client sent it, e.g. "email" or
	// "items[2].quantity".
	Field string `json:"field"`
	// Detail says what is wrong with it.
	Detail string `json:"detail"`
}

// Unprocessable returns a 422: the request is well-formed but its content is
// invalid. errs, when given, become the "errors" member.
func Unprocessable(detail string, errs ...FieldError) *Problem {
	p := New(http.StatusUnprocessableEntity, detail)
	if len(errs) > 0 {
		p.Extensions = map[string]any{"errors": errs}
	}
	return p
}

// TooManyRequests returns a 429; a positive retryAfter sets Retry-After and
// "retry_after".
func TooManyRequests(detail string, retryAfter time.Duration) *Problem {
	p := New(http.StatusTooManyRequests, detail)
	setRetryAfter(p, retryAfter)
	return p
}

// BadGateway returns a 502 naming the upstream that answered with something
// unusable, in the "upstream" member.
func BadGateway(upstream, detail string) *Problem {
	p := New(http.StatusBadGateway, detail)
	if upstream != "" {
		p.Extensions = map[string]any{"upstream": upstream}
	}
	return p
}

// ServiceUnavailable returns a 503 naming the dependency that failed in the
// "dependency" member; a positive retryAfter sets Retry-After and
// "retry_after". An empty detail becomes "<dependency> is unavailable".
func ServiceUnavailable(dependency, detail string, retryAfter time.Duration) *Problem {
	if detail == "" {
		detail = dependencyDetail(dependency)
	}
	p := New(http.StatusServiceUnavailable, detail)
	if dependency != "" {
		p.Extensions = map[string]any{"dependency": dependency}
	}
	setRetryAfter(p, retryAfter)
	return p
}

// UpstreamFailed returns the problem of a failed call to an upstream (an
// http or gRPC upstream, a model provider): a 503 like [ServiceUnavailable]
// when outage is true, otherwise a 502 like [BadGateway]. Both name the
// upstream in the "upstream" member, and cause is kept in Err for the logs.
func UpstreamFailed(upstream, detail string, outage bool, retryAfter time.Duration, cause error) *Problem {
	var p *Problem
	if outage {
		p = ServiceUnavailable(upstream, detail, retryAfter)
	} else {
		p = BadGateway(upstream, detail)
	}
	p.SetExtension("upstream", upstream)
	p.Err = cause
	return p
}

// Internal returns a 500 with a generic detail. It is what an unexpected
// error becomes; see [From].
func Internal() *Problem {
	return &Problem{
		Status: http.StatusInternalServerError,
		Title:  "Internal Server Error",
		Detail: detailInternal,
	}
}

func setRetryAfter(p *Problem, d time.Duration) {
	if d <= 0 {
		return
	}
	p.RetryAfter = d
	p.SetExtension("retry_after", retryAfterSeconds(d))
}
