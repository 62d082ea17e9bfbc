package framework

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/jfastframework/jfast/problem"
)

// DecodeOption changes how [DecodeJSON] reads a body.
type DecodeOption func(*decodeOptions)

type decodeOptions struct {
	disallowUnknown bool
}

// DisallowUnknownFields makes [DecodeJSON] refuse an object member that no
// field of the target takes (a 422 naming it), instead of ignoring it: for
// routes where a misspelt field silently taking its zero value would do harm.
func DisallowUnknownFields() DecodeOption {
	return func(o *decodeOptions) { o.disallowUnknown = true }
}

// DecodeJSON reads r's body as one JSON value into v, a pointer, and answers
// what a client can get wrong with a problem the handler returns as is:
//
//   - 415 when the Content-Type is not JSON (application/json, or any
//     type ending in +json);
//   - 413 when the body is larger than the route's limit (app.max_body_bytes,
//     or [MaxBodyBytes]), without reading it when Content-Length says so;
//   - 408 when the body does not arrive within the request's deadline, 400
//     when the client breaks it off (see [BodyReadError]);
//   - 400 when the body is empty, is not JSON (naming the line, column and
//     byte of the error), or holds more than one value;
//   - 422 when a value has the wrong type for its field, naming the field in
//     the "errors" member (as a dotted path of JSON names: "items.quantity");
//   - 422 when the body as a whole is not what v takes: an array, or null,
//     for a struct (null is taken by a pointer, an interface or a type
//     with its own UnmarshalJSON);
//   - 422 naming an unknown field, with [DisallowUnknownFields].
//
// Any other error (v not a pointer) is the handler's mistake, returned as is
// (a 500). Validation of the values themselves is the handler's, with
// [problem.Unprocessable].
//
//	var req OrderRequest
//	if err := framework.DecodeJSON(r, &req); err != nil {
//		return err
//	}
func DecodeJSON(r *http.Request, v any, opts ...DecodeOption) error {
	var o decodeOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkJSONContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	data, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return problem.BadRequest("the request body is empty; it must be a JSON value")
	}
	if err := nullBody(data, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if o.disallowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err, data)
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		at := len(data) - len(rest)
		return problem.BadRequest("the request body holds more than one JSON value: another begins " + position(data, at))
	}
	return nil
}

// nullBody answers 422 for a body that is only null where v cannot hold
// null: encoding/json leaves such a target as it was, and the handler would
// read a zero value as if the client had sent one. A pointer, an interface
// or a type with its own UnmarshalJSON takes null as encoding/json gives it.
func nullBody(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if !bytes.Equal(bytes.TrimSpace(data), []byte("null")) || t == nil || t.Kind() != reflect.Pointer {
		return nil // not null, or v is not a pointer, which Decode answers
	}
	switch e := t.Elem(); {
	case e.Kind() == reflect.Pointer, e.Kind() == reflect.Interface, t.Implements(jsonUnmarshaler):
		return nil
	default:
		return problem.Unprocessable(fmt.Sprintf("the request body must be %s, got null", jsonKind(e)))
	}
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkJSONContentType answers 415 unless the media type is JSON.
func checkJSONContentType(ct string) error {
	const want = `send the body with "Content-Type: application/json"`
	if ct == "" {
		return problem.UnsupportedMediaType("the request has no Content-Type; " + want)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return problem.UnsupportedMediaType("the Content-Type is malformed; " + want)
	}
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		return nil
	}
	return problem.UnsupportedMediaType(fmt.Sprintf("this route takes JSON, not %s; %s", mt, want))
}

// readBody reads the whole body under the route's limit.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if err := DeclaredBodyTooLarge(r); err != nil {
		return nil, problem.From(err)
	}
	limit := bodyLimit(r)
	body := r.Body
	if _, ours := body.(*requestBody); !ours {
		body = http.MaxBytesReader(nil, body, limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1) // +1: ReadFrom stops at EOF without growing
	}
	if _, err := buf.ReadFrom(body); err != nil {
		var readErr *BodyReadError
		var tooLarge *http.MaxBytesError
		if !errors.As(err, &readErr) && !errors.As(err, &tooLarge) {
			err = bodyError(err)
		}
		return nil, problem.From(err)
	}
	return buf.Bytes(), nil
}

// decodeProblem turns a decoding error into the problem that answers it.
func decodeProblem(err error, data []byte) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var invalid *json.InvalidUnmarshalError
	switch {
	case errors.As(err, &syntax):
		// Offset counts the bytes read up to and including the offending one.
		return problem.BadRequest("the request body is not valid JSON: " + syntax.Error() + " " + position(data, int(syntax.Offset)-1))
	case errors.Is(err, io.ErrUnexpectedEOF):
		end := len(bytes.TrimRight(data, " \t\r\n"))
		return problem.BadRequest("the request body is not valid JSON: it ends in the middle of a value, " + position(data, end))
	case errors.As(err, &typ):
		want := jsonKind(typ.Type)
		if typ.Field == "" {
			return problem.Unprocessable(fmt.Sprintf("the request body must be %s, got %s", want, typ.Value))
		}
		return problem.Unprocessable("a field of the request body has the wrong type",
			problem.FieldError{Field: typ.Field, Detail: fmt.Sprintf("must be %s, got %s", want, typ.Value)})
	case errors.As(err, &invalid):
		return fmt.Errorf("framework.DecodeJSON: %w", err) // a programming error: 500
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return problem.Unprocessable("the request body has a field this route does not take",
			problem.FieldError{Field: strings.Trim(name, `"`), Detail: "unknown field"})
	}
	if p, ok := problem.As(err); ok { // from a type's own UnmarshalJSON
		return p
	}
	// A type's own UnmarshalJSON refused a value (a time that does not
	// parse): the client's mistake, whose message may say too much.
	p := problem.Unprocessable("a value of the request body does not have the form its field takes")
	p.Err = err
	return p
}

// position says where the byte at index i of data is, for a person reading
// the body: "at line 3, column 14" (both from 1; columns count bytes).
func position(data []byte, i int) string {
	i = min(max(i, 0), len(data))
	line := 1 + bytes.Count(data[:i], []byte{'\n'})
	col := i - bytes.LastIndexByte(data[:i], '\n')
	return fmt.Sprintf("at line %d, column %d", line, col)
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonKind names the JSON a Go type takes, for a client who knows no Go.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	if s := scalarKind(t.Kind()); s != "" {
		return s
	}
	switch t.Kind() {
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return fmt.Sprintf("an array of %d", t.Len())
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}
