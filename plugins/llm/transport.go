package llm

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
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
// read that returns data tells the attempt's [watch] the stream is alive.
// A request whose context carries no watch (a plain call) passes as is.
type gapTransport struct{ rt http.RoundTripper }

type watchKey struct{}

// RoundTrip implements http.RoundTripper.
func (t gapTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w, _ := req.Context().Value(watchKey{}).(*watch)
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
	w *watch
}

func (b *gapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.w.touch()
	}
	return n, err
}

// watch cuts a streamed attempt that stays silent for read_gap: from the
// request to the first byte of the body, then between two reads. Its timer is the
// client's clock, so tests move it; a read only records the time (no timer
// is reset per chunk), and when the timer fires the watch re-arms for what
// is left of the gap since the last read.
type watch struct {
	gap    time.Duration
	clock  resilience.Clock
	cancel context.CancelCauseFunc
	last   atomic.Int64 // the clock's UnixNano of the last read
	done   chan struct{}
	stop   sync.Once
	exited chan struct{}
}

// startWatch arms a watch over the attempt whose context cancel ends.
func startWatch(clock resilience.Clock, gap time.Duration, cancel context.CancelCauseFunc) *watch {
	w := &watch{gap: gap, clock: clock, cancel: cancel, done: make(chan struct{}), exited: make(chan struct{})}
	w.touch()
	go w.run()
	return w
}

func (w *watch) touch() { w.last.Store(w.clock.Now().UnixNano()) }

func (w *watch) run() {
	defer close(w.exited)
	wait := w.gap
	for {
		t := w.clock.NewTimer(wait)
		select {
		case <-w.done:
			t.Stop()
			return
		case <-t.C():
		}
		idle := w.clock.Now().Sub(time.Unix(0, w.last.Load()))
		if idle >= w.gap {
			w.cancel(errReadGap)
			return
		}
		wait = w.gap - idle
	}
}

// end stops the watch and waits for its goroutine; safe to call twice and
// on a nil watch.
func (w *watch) end() {
	if w == nil {
		return
	}
	w.stop.Do(func() { close(w.done) })
	<-w.exited
}
