package problem

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ContentType is the media type of a problem body (RFC 9457 §3).
const ContentType = "application/problem+json"

// Problem is an RFC 9457 problem detail. It is an error, so a handler can
// return it, and it marshals to the JSON body the client receives.
//
// The zero values of the optional fields are filled when the problem is
// rendered, never in the value itself: Type becomes "about:blank", Title the
// status text, Status 0 becomes 500, and [Write] fills Instance and RequestID
// from the request.
type Problem struct {
	// Type is a URI reference that identifies the problem type. Defaults to
	// "about:blank" (RFC 9457 §4.2.1), which means the title is the status
	// text and nothing more is defined.
	Type string
	// Title is a short, human-readable summary of the problem type. Defaults
	// to the status's reason phrase as RFC 9110 names it ([ReasonPhrase]).
	Title string
	// Status is the HTTP status code. Defaults to 500 when zero.
	Status int
	// Detail explains this occurrence to the client. It is sent as is, so it
	// must not hold internals (addresses, SQL, secrets).
	Detail string
	// Instance identifies this occurrence, a URI reference. Defaults to the
	// request's path as it was sent, percent-encoded (a URI reference, unlike
	// the decoded URL.Path), when written by [Write].
	Instance string
	// RequestID ties the body to the logs. Defaults to the request ID in the
	// request's context (see package requestid) when written by [Write].
	RequestID string
	// Extensions are extra members of the JSON object, such as "upstream",
	// "dependency", "errors" or "retry_after". A key equal to a standard
	// member (type, title, status, detail, instance, request_id) is ignored.
	Extensions map[string]any
	// RetryAfter, when positive, is sent as the Retry-After header in whole
	// seconds, rounded up, and as the "retry_after" member unless Extensions
	// already holds one.
	RetryAfter time.Duration
	// Header holds extra response headers, such as WWW-Authenticate, Allow or
	// RateLimit-*. They are added to the response by [Write].
	Header http.Header
	// Err is the cause, for logs only: it is never rendered. [Problem.Unwrap]
	// returns it.
	Err error
}

// standard lists the members RFC 9457 and jfast define, in output order.
var standard = [...]string{"type", "title", "status", "detail", "instance", "request_id"}

func isStandard(key string) bool {
	for _, s := range standard {
		if s == key {
			return true
		}
	}
	return false
}

// Error returns the status, the title and the detail in lowercase-led form,
// such as "404 not found: no invoice for this order". It never includes Err,
// which may carry addresses or credentials.
func (p *Problem) Error() string {
	status := p.status()
	title := strings.ToLower(p.title(status))
	s := strconv.Itoa(status) + " " + title
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s
}

// Unwrap returns the cause, so errors.Is and errors.As see through a Problem.
func (p *Problem) Unwrap() error { return p.Err }

// SetExtension sets the member key of Extensions to value, making the map
// when there is none.
func (p *Problem) SetExtension(key string, value any) {
	if p.Extensions == nil {
		p.Extensions = make(map[string]any, 1)
	}
	p.Extensions[key] = value
}

// Problem returns p itself, so a *Problem is a [Renderer] too.
func (p *Problem) Problem() *Problem { return p }

func (p *Problem) status() int {
	if p.Status == 0 {
		return http.StatusInternalServerError
	}
	return p.Status
}

func (p *Problem) title(status int) string {
	if p.Title != "" {
		return p.Title
	}
	return ReasonPhrase(status)
}

// rfc9110 holds the reason phrases RFC 9110 (§15) gives differently from
// net/http's StatusText, which keeps the older RFC 7231 ones.
var rfc9110 = map[int]string{
	http.StatusRequestEntityTooLarge:        "Content Too Large",
	http.StatusRequestURITooLong:            "URI Too Long",
	http.StatusRequestedRangeNotSatisfiable: "Range Not Satisfiable",
	http.StatusUnprocessableEntity:          "Unprocessable Content",
}

// ReasonPhrase is the status's reason phrase as RFC 9110 names it (413
// "Content Too Large", 422 "Unprocessable Content"), the default title of a
// problem; "Error" for a status it does not name.
func ReasonPhrase(status int) string {
	if t, ok := rfc9110[status]; ok {
		return t
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "Error"
}

// retryAfterSeconds rounds d up to whole seconds, as the Retry-After header
// only carries integers (RFC 9110 §10.2.3) and rounding down would invite the
// client back too early.
func retryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// MarshalJSON encodes p as an RFC 9457 object with the members type, title,
// status, detail, instance and request_id in that order (detail, instance and
// request_id only when set), then the extensions sorted by name. Extensions
// whose name is a standard member are skipped.
func (p *Problem) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(256)
	status := p.status()
	typ := p.Type
	if typ == "" {
		typ = "about:blank"
	}
	buf.WriteString(`{"type":`)
	writeString(&buf, typ)
	buf.WriteString(`,"title":`)
	writeString(&buf, p.title(status))
	buf.WriteString(`,"status":`)
	buf.WriteString(strconv.Itoa(status))
	if p.Detail != "" {
		buf.WriteString(`,"detail":`)
		writeString(&buf, p.Detail)
	}
	if p.Instance != "" {
		buf.WriteString(`,"instance":`)
		writeString(&buf, p.Instance)
	}
	if p.RequestID != "" {
		buf.WriteString(`,"request_id":`)
		writeString(&buf, p.RequestID)
	}

	keys := make([]string, 0, len(p.Extensions)+1)
	for k := range p.Extensions {
		if !isStandard(k) {
			keys = append(keys, k)
		}
	}
	_, hasRetry := p.Extensions["retry_after"]
	addRetry := p.RetryAfter > 0 && !hasRetry
	if addRetry {
		keys = append(keys, "retry_after")
	}
	slices.Sort(keys)
	for _, k := range keys {
		buf.WriteByte(',')
		writeString(&buf, k)
		buf.WriteByte(':')
		if k == "retry_after" && addRetry {
			buf.WriteString(strconv.FormatInt(retryAfterSeconds(p.RetryAfter), 10))
			continue
		}
		v, err := json.Marshal(p.Extensions[k])
		if err != nil {
			return nil, errors.New("problem: extension member " + strconv.Quote(k) + ": " + err.Error())
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// writeString writes s as a JSON string, as json.Marshal does: a string of
// printable ASCII that needs no escape (most titles, details, paths and
// request IDs) as it is, any other through json.Marshal.
func writeString(buf *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			buf.Write(b)
			return
		}
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
}

// UnmarshalJSON decodes a problem body, such as one an upstream sent: the
// standard members fill their fields and every other member goes to
// Extensions. RetryAfter, Header and Err are left as they are.
func (p *Problem) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	fields := map[string]any{
		"type": &p.Type, "title": &p.Title, "status": &p.Status,
		"detail": &p.Detail, "instance": &p.Instance, "request_id": &p.RequestID,
	}
	for k, v := range raw {
		if dst, ok := fields[k]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return errors.New("problem: member " + strconv.Quote(k) + ": " + err.Error())
			}
			continue
		}
		var ext any
		if err := json.Unmarshal(v, &ext); err != nil {
			return err
		}
		p.SetExtension(k, ext)
	}
	return nil
}
