package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/jfastframework/jfast/problem"
)

// ProviderHeader is the response header [Relay] names the answering
// provider in, so a client (and a test) can tell when a fallback answered.
const ProviderHeader = "X-LLM-Provider"

// relayWriteTimeout bounds each write of a relayed stream: a client that
// cannot take one chunk in 10 s is gone, and its provider call is cancelled.
const relayWriteTimeout = 10 * time.Second

// Relay writes s to w as server-sent events in the chat-completions format,
// so a browser or any OpenAI-compatible client reads it as it would the
// provider's own stream: one "data: <chunk JSON>" event per chunk, flushed as
// it arrives, then "data: [DONE]". A chunk whose JSON spans lines (a
// provider may send one event as several data lines) is written as one
// "data:" line per line, so nothing a provider sends can end an event early
// or add an event, id or retry field to the client's stream. The response names the provider that
// answered in the X-LLM-Provider header. A stream cut after it started ends
// with an "error" event whose data is the problem+json body (a 503 naming
// the provider) instead of [DONE], and Relay returns the stream's error (the
// framework can only log it: the response has started). A client that goes
// away ends the relay, and closing the stream cancels the provider's
// request. Relay closes s.
//
// Call ChatStream with framework.StreamContext(r) when the answer may take
// longer than app.request_timeout: the provider's timeout bounds it.
func Relay(w http.ResponseWriter, r *http.Request, s *Stream) error {
	defer s.Close()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	h.Set(ProviderHeader, s.Provider())
	w.WriteHeader(http.StatusOK)
	var buf []byte
	send := func(event string, data []byte) error {
		buf = buf[:0]
		if event != "" {
			buf = append(buf, "event: "...)
			buf = append(buf, event...)
			buf = append(buf, '\n')
		}
		buf = appendData(buf, data)
		buf = append(buf, '\n')
		if err := rc.SetWriteDeadline(time.Now().Add(relayWriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return rc.Flush()
	}
	for s.Next() {
		chunk := s.Current()
		data := []byte(chunk.RawJSON())
		if len(data) == 0 {
			var err error
			if data, err = json.Marshal(chunk); err != nil {
				return err
			}
		}
		if err := send("", data); err != nil {
			return err // the client went away: the deferred Close cancels the provider's request
		}
	}
	if err := s.Err(); err != nil {
		body, merr := json.Marshal(problem.From(err))
		if merr == nil {
			_ = send("error", body)
		}
		return err
	}
	return send("", []byte("[DONE]"))
}

// appendData appends data to buf as the data lines of one server-sent event:
// each line of data (ended by CRLF, LF or CR, as an event-stream parser
// reads them) its own "data: " line. A trailing line end adds no empty line.
func appendData(buf, data []byte) []byte {
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			buf = append(buf, "data: "...)
			buf = append(buf, data...)
			return append(buf, '\n')
		}
		buf = append(buf, "data: "...)
		buf = append(buf, data[:i]...)
		buf = append(buf, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
		if len(data) == 0 {
			return buf
		}
	}
}
