package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
)

// newTransport returns the connection pool of one provider, built as every
// jfast client's (egress.NewTransport): no proxy from the environment (it
// would receive the API key), the proxy key's instead when set, and the
// address guard with address_guard = true. connect_timeout bounds the dial
// and, separately, the TLS handshake; nothing bounds the wait for the
// response's headers here, since a plain call's answer comes whole when the
// model has finished (timeout bounds it, and read_gap a stream's
// silences, through the attempt's context). The proxy URL was checked by
// the config's problems.
func newTransport(cfg ProviderConfig) *http.Transport {
	o := egress.TransportOpts{
		ConnectTimeout:      cfg.ConnectTimeout,
		MaxIdleConns:        cfg.MaxConcurrent,
		MaxIdleConnsPerHost: cfg.MaxConcurrent,
		HTTP2:               true,
	}
	if cfg.Proxy != "" {
		o.Proxy, _ = url.Parse(cfg.Proxy)
	}
	if cfg.AddressGuard {
		g := egress.NewGuard(egress.GuardOpts{
			Client: cfg.Name, Kind: "provider", AllowHosts: cfg.AllowHosts,
			Fix: "name the host in allow_hosts, or set address_guard = false for a model server on this network",
		})
		o.Dial = g.Dial(cfg.ConnectTimeout)
	}
	return egress.NewTransport(o)
}

// gapTransport watches the bytes of a streamed attempt's response: every
// read that returns data tells the attempt's read-gap watch (startWatch) the
// stream is alive, and the lines read tell it whether the provider sent the
// stream's end, "data: [DONE]". A request whose context carries no watch (a
// plain call) passes as is.
type gapTransport struct{ rt http.RoundTripper }

type watchKey struct{}

// streamWatch is what a streamed attempt learns from its response's bytes,
// read by the goroutine that reads the stream.
type streamWatch struct {
	idle *resilience.IdleWatch
	line [len("data: [DONE]")]byte // the start of the line being read
	n    int                       // its length, up to len(line)
	done bool                      // a line "data: [DONE]" (or "data:[DONE]") was read
}

// RoundTrip implements http.RoundTripper.
func (t gapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w, _ := req.Context().Value(watchKey{}).(*streamWatch)
	resp, err := t.rt.RoundTrip(req)
	if err != nil || w == nil {
		return resp, err
	}
	// The headers alone do not count: a provider that sends them and then
	// nothing has not started answering.
	resp.Body = &gapBody{ReadCloser: resp.Body, w: w}
	return resp, nil
}

type gapBody struct {
	io.ReadCloser
	w *streamWatch
}

func (b *gapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.idle.Touch()
		b.w.scan(p[:n])
	}
	if err != nil {
		b.w.endLine() // a last line without its line break
	}
	return n, err
}

// scan follows the lines of p (an event stream's lines end at CRLF, LF or
// CR), keeping the start of each.
func (w *streamWatch) scan(p []byte) {
	for _, c := range p {
		if c == '\n' || c == '\r' {
			w.endLine()
			continue
		}
		if w.n < len(w.line) {
			w.line[w.n] = c
			w.n++
		}
	}
}

// endLine ends the line being read: the stream's end is a data field whose
// value (after one optional space, as an event-stream parser reads it)
// starts with [DONE], as the SDK reads it.
func (w *streamWatch) endLine() {
	if v, ok := bytes.CutPrefix(w.line[:w.n], []byte("data:")); ok && bytes.HasPrefix(bytes.TrimPrefix(v, []byte(" ")), []byte("[DONE]")) {
		w.done = true
	}
	w.n = 0
}

// startWatch arms the read-gap watch of a streamed attempt, which cuts it
// (cancel, with errReadGap) when it stays silent for gap: from the request to
// the first byte of the body, then between two reads. Its timer is the
// client's clock, so tests move it; a read only records the time.
func startWatch(clock resilience.Clock, gap time.Duration, cancel context.CancelCauseFunc) *streamWatch {
	return &streamWatch{idle: resilience.WatchIdle(clock, gap, func() { cancel(errReadGap) })}
}
