package llm

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3/packages/ssestream"
)

// EventError is the cause ([Error].Err) of a streamed attempt the provider
// ended with an error event: a "data:" line whose JSON has an "error"
// member, as OpenAI-compatible providers send when a stream fails after its
// 200 (a content filter, a rate limit, an overload). It keeps the event's
// type and code, which say what it stands for; the event's message is
// dropped, since it may quote the prompt, and its text names neither.
type EventError struct {
	// Type is the error's "type" member ("invalid_request_error",
	// "server_error", "overloaded_error"…), "" when it has none or it is
	// not a string.
	Type string
	// Code is the error's "code" member ("content_filter",
	// "rate_limit_exceeded"…), "" when it has none or it is not a string.
	Code string
	// Status is the HTTP status the event stands for, by the table of
	// docs/llm.md ("Errors"): a 4xx for a refusal (400 for an invalid
	// request or a content filter), 429 for a rate limit; 0 for any other
	// event, which is taken for the provider failing.
	Status int
}

// Error names what the event stands for, never its message.
func (e *EventError) Error() string {
	if e.Status == 0 {
		return "the provider sent an error event of no known refusal or rate-limit type"
	}
	return "the provider sent an error event standing for " + statusText(e.Status)
}

// eventStatus is the status an error event stands for, by its code or, when
// the code is not listed, its type: the refusals a provider answers as a 4xx
// when it can still change the status, and its rate limits. Any other event
// (server_error, api_error, overloaded_error, none given) stands for no
// status: the provider failing, as a reset stream is.
var eventStatus = map[string]int{
	"invalid_request_error":    http.StatusBadRequest,
	"content_filter":           http.StatusBadRequest,
	"content_policy_violation": http.StatusBadRequest,
	"context_length_exceeded":  http.StatusBadRequest,
	"authentication_error":     http.StatusUnauthorized,
	"permission_error":         http.StatusForbidden,
	"not_found_error":          http.StatusNotFound,
	"request_too_large":        http.StatusRequestEntityTooLarge,
	"rate_limit_exceeded":      http.StatusTooManyRequests,
	"rate_limit_error":         http.StatusTooManyRequests,
}

// eventError returns the cause of a stream cut by err, when err is the
// SDK's error for an error event.
func eventError(err error) (*EventError, bool) {
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		return nil, false
	}
	// The SDK found an "error" member; when it is an object, its type and
	// code (strings, when given) classify it.
	var event struct {
		Error json.RawMessage `json:"error"`
	}
	var member struct{ Type, Code any }
	if json.Unmarshal(se.Event.Data, &event) == nil {
		_ = json.Unmarshal(event.Error, &member)
	}
	e := &EventError{}
	e.Type, _ = member.Type.(string)
	e.Code, _ = member.Code.(string)
	if s, ok := eventStatus[e.Code]; ok {
		e.Status = s
	} else {
		e.Status = eventStatus[e.Type]
	}
	return e, true
}
