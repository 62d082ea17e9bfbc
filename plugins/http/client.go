package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/framework/egress"
	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/requestid"
)

// ServiceClient calls one upstream. It owns the upstream's connection pool,
// breaker, retry budget and bulkhead, which protect something only if every
// call to the upstream goes through the same client: take it once at boot
// ([Client]) or make one with [NewClient], never one per request. Its
// policies also come as an http.RoundTripper ([ServiceClient.Transport]) for
// code that builds its own requests (an SDK, a reverse proxy). A
// ServiceClient is safe for concurrent use.
type ServiceClient struct {
	*core
	verbs
	base      string
	scheme    string // of base_url, for the RoundTripper's origin check
	host      string
	port      string
	pol       *policy
	health    *healthChecker // the instances' health checks; nil without health_path
	transport *upstreamTransport
}

// NewClient returns a client for one upstream, for scripts and tests; a
// service takes its clients from the plugin with [Client]. Zero fields of u
// take their defaults (Attempts too: 1 for none); a missing or
// invalid BaseURL or a negative setting is an error. Close the client when
// done with it.
func NewClient(u Upstream, opts ...ClientOption) (*ServiceClient, error) {
	return newClient(u.withDefaults(), opts...)
}

// newClient builds a client from settings with every default filled.
func newClient(u Upstream, opts ...ClientOption) (*ServiceClient, error) {
	var o clientOptions
	for _, opt := range opts {
		opt(&o)
	}
	core, err := newCore(u, u.problems(), o, nil, 0)
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(u.BaseURL) // checked by newCore
	core.origin = originOf(base)
	c := &ServiceClient{
		core:   core,
		base:   strings.TrimSuffix(u.BaseURL, "/"),
		scheme: base.Scheme,
		host:   base.Hostname(),
		port:   base.Port(),
	}
	if c.port == "" {
		c.port = defaultPort(base.Scheme)
	}
	c.pol = core.newPolicy(u.Name, core.origin, core.metrics.transition)
	core.metrics.dep.Follow(c.pol.breaker)
	if c.pol.instances, err = newInstances(u, core, o.lookup, o.logger); err != nil {
		return nil, err
	}
	if c.pol.instances != nil {
		c.pol.instances.Start()
		c.health = startHealth(c)
	}
	c.verbs = verbs{c.Do}
	c.transport = &upstreamTransport{c: c}
	return c, nil
}

// Upstream returns the client's settings, defaults filled in.
func (c *ServiceClient) Upstream() Upstream { return c.up }

// Breaker returns the upstream's breaker, for /ready and tests.
func (c *ServiceClient) Breaker() *resilience.Breaker { return c.pol.breaker }

// InFlight returns how many calls to the upstream are in flight: holding a
// bulkhead place, streamed responses included until their body ends.
func (c *ServiceClient) InFlight() int { return c.pol.bulkhead.InFlight() }

// Close closes the idle connections; calls made after Close fail with
// [UpstreamUnavailable]. Calls in flight finish.
func (c *ServiceClient) Close() error {
	c.close()
	if c.pol.instances != nil {
		c.health.stop()
		c.pol.instances.Stop()
	}
	return nil
}

// Instances returns the upstream's instances, or nil when base_url's host
// is its one instance.
func (c *ServiceClient) Instances() *egress.Instances { return c.pol.instances }

// Options calls OPTIONS path. See [ServiceClient.Do].
func (c *ServiceClient) Options(ctx context.Context, path string, opts ...CallOption) (*http.Response, error) {
	return c.Do(ctx, http.MethodOptions, path, nil, opts...)
}

// Do calls method on the upstream's base_url followed by path ("/invoices/7",
// with a query if any; it must start with "/" or "?").
//
// body is nil, []byte (sent as application/octet-stream), string
// (text/plain; charset=utf-8), url.Values (a form) or any other value, sent as
// JSON (wrap a []byte or string in [JSON] to send it as JSON as is). Streaming
// bodies (io.Reader) are refused: a retry must be able to send the body again.
//
// The response is the one the upstream sent, whatever its status (a 404, a
// 500, the last 503 after the retries); its body has been read completely and
// can be read again (see [Body]); closing it is optional. Only a call that got
// no response at all, or one whose body was over max_response_bytes, returns
// an error, always an [UpstreamError] kind: [CircuitOpen], [BulkheadFull],
// [Throttled], [UpstreamTimeout], [UpstreamUnavailable] or [ResponseTooLarge].
// A body that cannot be encoded or a malformed path is a plain error and
// nothing is sent.
func (c *ServiceClient) Do(ctx context.Context, method, path string, body any, opts ...CallOption) (*http.Response, error) {
	if path != "" && path[0] != '/' && path[0] != '?' {
		return nil, fmt.Errorf("http: upstream '%s': path %q must start with / (it is appended to base_url)", c.up.Name, path)
	}
	return c.do(ctx, c, method, c.base+path, body, opts)
}

// resolve implements resolver: every call goes to the upstream's origin.
func (c *ServiceClient) resolve(_ *url.URL, route string) (*policy, *resilience.Breaker, error) {
	return c.pol, c.breakerFor(c.pol, route), nil
}

// verbs are the Get, Head, Delete, Post, Put and Patch of both clients: each
// is the client's Do with the method named. target is a path on the upstream
// for a [ServiceClient], an absolute URL for a [SharedClient].
type verbs struct {
	send func(ctx context.Context, method, target string, body any, opts ...CallOption) (*http.Response, error)
}

// Get calls GET target: a path on a [ServiceClient]'s upstream, or a
// [SharedClient]'s absolute URL. See [ServiceClient.Do] and [SharedClient.Do].
func (v verbs) Get(ctx context.Context, target string, opts ...CallOption) (*http.Response, error) {
	return v.send(ctx, http.MethodGet, target, nil, opts...)
}

// Head calls HEAD target. See [ServiceClient.Do] and [SharedClient.Do].
func (v verbs) Head(ctx context.Context, target string, opts ...CallOption) (*http.Response, error) {
	return v.send(ctx, http.MethodHead, target, nil, opts...)
}

// Delete calls DELETE target. See [ServiceClient.Do] and [SharedClient.Do].
func (v verbs) Delete(ctx context.Context, target string, opts ...CallOption) (*http.Response, error) {
	return v.send(ctx, http.MethodDelete, target, nil, opts...)
}

// Post calls POST target with body. A POST is retried only with an
// [IdempotencyKey] (or Retry(true)). See [ServiceClient.Do] and [SharedClient.Do].
func (v verbs) Post(ctx context.Context, target string, body any, opts ...CallOption) (*http.Response, error) {
	return v.send(ctx, http.MethodPost, target, body, opts...)
}

// Put calls PUT target with body. See [ServiceClient.Do] and [SharedClient.Do].
func (v verbs) Put(ctx context.Context, target string, body any, opts ...CallOption) (*http.Response, error) {
	return v.send(ctx, http.MethodPut, target, body, opts...)
}

// Patch calls PATCH target with body. A PATCH is retried only with an
// [IdempotencyKey] (or Retry(true)). See [ServiceClient.Do] and [SharedClient.Do].
func (v verbs) Patch(ctx context.Context, target string, body any, opts ...CallOption) (*http.Response, error) {
	return v.send(ctx, http.MethodPatch, target, body, opts...)
}

// resolver finds the policy and the breaker of a call to u on route.
type resolver interface {
	resolve(u *url.URL, route string) (*policy, *resilience.Breaker, error)
}

// do makes one call of a client's API (a path on an upstream, a shared
// client's absolute URL) to target.
func (c *core) do(ctx context.Context, r resolver, method, target string, body any, opts []CallOption) (*http.Response, error) {
	payload, contentType, err := encodeBody(body)
	if err != nil {
		return nil, fmt.Errorf("http: upstream '%s': %w", c.up.Name, err)
	}
	x := newClientExchange()
	req, err := http.NewRequestWithContext(x.requestContext(ctx), method, target, nil)
	if err != nil {
		x.release()
		return nil, fmt.Errorf("http: upstream '%s': %w", c.up.Name, err)
	}
	retry := safeMethod(method)
	route, forced := c.setHeaders(ctx, req.Header, contentType, opts, &retry)
	out := framework.OutboundCallOf(ctx)
	if route == "" {
		route = routeOf(out)
	}
	pol, br, err := r.resolve(req.URL, route)
	if err != nil {
		x.release()
		return nil, err
	}
	if payload != nil {
		req.ContentLength = int64(len(payload))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(payload)), nil }
	}

	var dones []func(int, int, error)
	for _, observe := range c.observe {
		var done func(int, int, error)
		ctx, done = observe(ctx, c.up.Name, method)
		if done != nil {
			dones = append(dones, done)
		}
	}
	x.req, x.header, x.payload, x.retry, x.pol, x.br, x.out = req, req.Header, payload, retry, pol, br, out
	x.resend = !retry && !forced
	resp, attempts, err := c.call(ctx, x)
	x.release()
	if len(dones) > 0 {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		for _, done := range dones {
			done(status, attempts, err)
		}
	}
	return resp, err
}

// setHeaders fills h in the order of docs/http.md: configured headers, the
// request ID, the forwarded bearer token, the idempotency key and the body's
// Content-Type, then the call's own headers, which win. It returns the
// route the options name, if any, and whether Retry decided retry.
func (c *core) setHeaders(ctx context.Context, h http.Header, contentType string, opts []CallOption, retry *bool) (route string, forced bool) {
	if len(c.header) > 0 { // a range over an empty map still sets up an iterator
		maps.Copy(h, c.header)
	}
	if id := requestid.FromContext(ctx); id != "" {
		h["X-Request-Id"] = []string{id}
	}
	if c.up.ForwardAuthorization {
		if tok := framework.BearerToken(ctx); tok != "" {
			h["Authorization"] = []string{"Bearer " + tok}
		}
	}
	if contentType != "" {
		h["Content-Type"] = []string{contentType}
	}
	for _, o := range opts {
		switch o.kind {
		case optIdempotencyKey:
			h["Idempotency-Key"] = []string{o.value}
			if !forced {
				*retry = true
			}
		case optRetry:
			*retry, forced = o.on, true
		case optHeader:
			h.Set(o.name, o.value)
		case optHeaders:
			for k, v := range o.header {
				h[http.CanonicalHeaderKey(k)] = v
			}
		case optRoute:
			route = o.value
		}
	}
	return route, forced
}

// safeMethod reports whether repeating method is safe without an idempotency
// key (RFC 9110 §9.2.2).
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// Body is the body of a response the client returns: read completely before
// the call returned, so reading it needs no network and cannot time out. It
// can be read again: Close rewinds it, and Bytes returns it whole.
type Body struct {
	b []byte
	r bytes.Reader
}

// Read reads from the body.
func (b *Body) Read(p []byte) (int, error) { return b.r.Read(p) }

// Seek implements io.Seeker.
func (b *Body) Seek(offset int64, whence int) (int64, error) { return b.r.Seek(offset, whence) }

// Close rewinds the body, so it can be read again. It never fails.
func (b *Body) Close() error {
	b.r.Reset(b.b)
	return nil
}

// Bytes returns the whole body, however much of it was read.
func (b *Body) Bytes() []byte { return b.b }

// BodyBytes returns the whole body of a response the client returned.
func BodyBytes(resp *http.Response) []byte {
	if b, ok := resp.Body.(*Body); ok {
		return b.b
	}
	return nil
}

// DecodeJSON decodes the whole body of a response the client returned into v.
func DecodeJSON(resp *http.Response, v any) error {
	if err := json.Unmarshal(BodyBytes(resp), v); err != nil {
		return fmt.Errorf("http: decoding the response body of %s: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// JSON marks a value to send as a JSON body. Any value that is not nil,
// []byte, string or url.Values is sent as JSON anyway; JSON is for a []byte or
// string that already holds JSON text, sent as is with Content-Type
// application/json.
type JSON struct{ Value any }

// encodeBody returns the bytes and Content-Type of a call's body.
func encodeBody(body any) ([]byte, string, error) {
	switch b := body.(type) {
	case nil:
		return nil, "", nil
	case []byte:
		return b, "application/octet-stream", nil
	case string:
		return []byte(b), "text/plain; charset=utf-8", nil
	case url.Values:
		return []byte(b.Encode()), "application/x-www-form-urlencoded", nil
	case JSON:
		switch raw := b.Value.(type) {
		case []byte:
			return raw, "application/json", nil
		case string:
			return []byte(raw), "application/json", nil
		}
		return encodeJSON(b.Value)
	case io.Reader:
		return nil, "", errors.New("streaming bodies are not supported: pass the bytes, so a retry can send them again")
	}
	return encodeJSON(body)
}

func encodeJSON(v any) ([]byte, string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("encoding the JSON body: %w", err)
	}
	return b, "application/json", nil
}
