package channels

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Message is one event as a handler or a server-sent events stream sees it.
type Message struct {
	// Channel is the channel's name, without the key prefix.
	Channel string
	// ID is the stream entry ID of a durable message ("1733000000000-0"),
	// which server-sent events send as the event's id; "" for broadcast.
	ID string
	// Payload is what was published, byte for byte.
	Payload []byte
	// RequestID is the request ID of the context Publish was called with
	// (the publishing request's), or "". The handler's context carries it
	// too (requestid.FromContext).
	RequestID string
	// Delivery is how many times this message has been handed to a handler
	// of this service, this time included: 1 the first time; more after a
	// redelivery (durable only).
	Delivery int
	// Published is when it was published: the publisher's clock for
	// broadcast, Redis's (the entry ID's milliseconds) for durable.
	Published time.Time
	// metadata is the trace context (traceparent, tracestate).
	metadata map[string]string
}

// The broadcast frame: a magic line, header lines, an empty line, then the
// payload as is:
//
//	jf1
//	r:<request id>
//	t:<unix milliseconds>
//	m:traceparent=00-…
//
//	<payload>
//
// A pub/sub message that does not start with the magic line (sent by
// redis-cli, another program) is delivered whole as the payload.
const frameMagic = "jf1\n"

// appendFrame appends the frame of one broadcast message to b.
func appendFrame(b []byte, requestID string, now time.Time, md map[string]string, payload []byte) []byte {
	b = append(b, frameMagic...)
	if requestID != "" && headerSafe(requestID) {
		b = append(b, "r:"...)
		b = append(b, requestID...)
		b = append(b, '\n')
	}
	b = append(b, "t:"...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, '\n')
	for k, v := range md {
		if headerSafe(k) && headerSafe(v) && !strings.ContainsRune(k, '=') {
			b = append(b, "m:"...)
			b = append(b, k...)
			b = append(b, '=')
			b = append(b, v...)
			b = append(b, '\n')
		}
	}
	b = append(b, '\n')
	return append(b, payload...)
}

// headerSafe reports whether s fits on one header line.
func headerSafe(s string) bool { return !strings.ContainsAny(s, "\r\n") }

// parseFrame reads a broadcast message; ok is false for a malformed frame,
// which is then delivered whole as the payload.
func parseFrame(channel, raw string) Message {
	m := Message{Channel: channel, Delivery: 1}
	if !strings.HasPrefix(raw, frameMagic) {
		m.Payload = []byte(raw)
		return m
	}
	rest := raw[len(frameMagic):]
	for {
		line, after, found := strings.Cut(rest, "\n")
		if !found {
			return Message{Channel: channel, Delivery: 1, Payload: []byte(raw)}
		}
		rest = after
		if line == "" {
			break
		}
		key, val, _ := strings.Cut(line, ":")
		switch key {
		case "r":
			m.RequestID = val
		case "t":
			if ms, err := strconv.ParseInt(val, 10, 64); err == nil {
				m.Published = time.UnixMilli(ms)
			}
		case "m":
			if k, v, ok := strings.Cut(val, "="); ok {
				if m.metadata == nil {
					m.metadata = make(map[string]string, 2)
				}
				m.metadata[k] = v
			}
		}
	}
	m.Payload = []byte(rest)
	return m
}

// Stream entry fields of a durable message. Metadata keys go in as
// "meta:<key>".
const (
	fieldPayload   = "payload"
	fieldRequestID = "request_id"
	fieldMeta      = "meta:"
)

// streamValues returns the XADD field-value list of a durable message.
func streamValues(requestID string, md map[string]string, payload []byte) []any {
	vals := make([]any, 0, 2+2*len(md)+2)
	vals = append(vals, fieldPayload, payload)
	if requestID != "" {
		vals = append(vals, fieldRequestID, requestID)
	}
	for k, v := range md {
		vals = append(vals, fieldMeta+k, v)
	}
	return vals
}

// entryMessage reads a stream entry. An entry without a payload field (added
// by another program) gets its fields as a JSON object for payload.
func entryMessage(channel, id string, values map[string]any) Message {
	m := Message{Channel: channel, ID: id, Delivery: 1, Published: idTime(id)}
	p, ok := values[fieldPayload]
	if !ok {
		m.Payload, _ = json.Marshal(values)
		return m
	}
	m.Payload = toBytes(p)
	if r, ok := values[fieldRequestID].(string); ok {
		m.RequestID = r
	}
	for k, v := range values {
		if name, ok := strings.CutPrefix(k, fieldMeta); ok {
			if m.metadata == nil {
				m.metadata = make(map[string]string, 2)
			}
			s, _ := v.(string)
			m.metadata[name] = s
		}
	}
	return m
}

func toBytes(v any) []byte {
	switch x := v.(type) {
	case string:
		return []byte(x)
	case []byte:
		return x
	}
	b, _ := json.Marshal(v)
	return b
}

// idTime is the time in a stream entry ID ("<ms>-<seq>").
func idTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// validID reports whether s is a full stream entry ID ("<ms>-<seq>"), as
// sent by a browser in Last-Event-ID.
func validID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok || len(ms) == 0 || len(ms) > 20 || len(seq) == 0 || len(seq) > 20 {
		return false
	}
	for _, part := range []string{ms, seq} {
		if _, err := strconv.ParseUint(part, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// compareIDs orders two valid stream entry IDs.
func compareIDs(a, b string) int {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	an, _ := strconv.ParseUint(am, 10, 64)
	bn, _ := strconv.ParseUint(bm, 10, 64)
	if an != bn {
		if an < bn {
			return -1
		}
		return 1
	}
	an, _ = strconv.ParseUint(as, 10, 64)
	bn, _ = strconv.ParseUint(bs, 10, 64)
	switch {
	case an < bn:
		return -1
	case an > bn:
		return 1
	}
	return 0
}

// appendEvent appends m as one server-sent event: its id (durable), the
// event name when set, and the payload as data lines (a payload with line
// breaks becomes several data lines, which the browser joins with "\n").
func appendEvent(b []byte, event string, m *Message) []byte {
	if m.ID != "" {
		b = append(b, "id: "...)
		b = append(b, m.ID...)
		b = append(b, '\n')
	}
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	payload := m.Payload
	payload = bytes.ReplaceAll(payload, []byte("\r\n"), []byte("\n"))
	for {
		line, rest, found := bytes.Cut(payload, []byte("\n"))
		line = bytes.ReplaceAll(line, []byte("\r"), nil)
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !found {
			break
		}
		payload = rest
	}
	return append(b, '\n')
}

// eventSize is about the length appendEvent gives m without an event name,
// so its buffer is allocated once.
func eventSize(m *Message) int {
	lines := bytes.Count(m.Payload, []byte("\n")) + 1
	return len("id: \n") + len(m.ID) + lines*len("data: \n") + len(m.Payload) + 1
}
