package llm_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jfastframework/jfast/framework/resilience"
	"github.com/jfastframework/jfast/jfasttest"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/problem"
)

// A stream's chunks reach the caller in order, then the usage chunk.
func TestStreamDeliversChunks(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{p.streamAnswer(false, "a", "b", "c")}
	c := client(t, p, llm.ProviderConfig{}, autoClock())
	s, err := c.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(s); got != "abc" || s.Err() != nil || s.Provider() != "primary" || s.Attempts() != 1 {
		t.Fatalf("read %q, err %v, provider %s, attempts %d; want abc from primary in 1 attempt", got, s.Err(), s.Provider(), s.Attempts())
	}
	if !strings.Contains(p.Bodies()[0], `"include_usage":true`) {
		t.Fatalf("request %s does not ask for usage", p.Bodies()[0])
	}
}

// A stream that sends three chunks and then stalls is cut at read_gap: the
// caller has the three chunks, then an error; nothing is retried.
func TestStreamStalledAfterChunksIsCutNotRetried(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{p.streamAnswer(true, "a", "b", "c"), p.streamAnswer(false, "x")}
	clk := jfasttest.NewClock()
	c := client(t, p, llm.ProviderConfig{ReadGap: 30 * time.Second}, clk)
	s, err := c.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for range 3 {
		if !s.Next() {
			t.Fatalf("stream ended after %q: %v", got, s.Err())
		}
		got += s.Current().Choices[0].Delta.Content
	}
	clk.BlockUntil(1) // the read-gap timer
	clk.Advance(30 * time.Second)
	within(t, 10*time.Second, func() {
		if s.Next() {
			t.Errorf("a fourth chunk: %+v", s.Current())
		}
	})
	e := llmError(t, s.Err())
	if got != "abc" || e.Kind != llm.KindTimeout || e.Chunks != 3 {
		t.Fatalf("read %q then %+v; want abc then a timeout after 3 chunks", got, e)
	}
	if pr, _ := problem.As(s.Err()); pr.Status != 503 || pr.Extensions["dependency"] != "primary" {
		t.Fatalf("problem %+v, want 503 naming primary", pr)
	}
	if p.Requests() != 1 {
		t.Fatalf("%d requests, want 1: a stream that reached the caller is never retried", p.Requests())
	}
	// A cut stream counts toward the breaker.
	if s := c.Breaker().Snapshot(); s.Consecutive != 1 && s.State == resilience.StateClosed {
		t.Fatalf("breaker %+v, want the cut counted", s)
	}
}

// A stream stalled for read_gap before its first chunk is a hang. While the
// provider answered another call meanwhile it is alive: the stream is
// retried and the retry's chunks are read. With nothing answered since the
// stream was sent, the silence rule opens the breaker at once and no retry
// waits read_gap again: the next call is refused unsent.
func TestStreamStalledBeforeFirstChunk(t *testing.T) {
	t.Parallel()
	type result struct {
		s   *llm.Stream
		err error
	}
	stall := func(t *testing.T, p *provider, c *llm.Client, clk *resilience.TestClock, meanwhile func()) result {
		t.Helper()
		done := make(chan result, 1)
		go func() {
			s, err := c.ChatStream(context.Background(), params("hi"))
			done <- result{s, err}
		}()
		// Once the provider has the request (and has sent only headers), the
		// attempt's silence is 30 s on the clock.
		waitFor(t, func() bool { return p.Requests() == 1 })
		meanwhile()
		clk.BlockUntil(1)
		clk.Advance(30 * time.Second)
		var r result
		within(t, 10*time.Second, func() { r = <-done })
		return r
	}
	t.Run("retried while others are answered", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t)
		p.script = []answer{p.streamAnswer(true), complete("other"), p.streamAnswer(false, "a", "b")}
		clk := jfasttest.NewClock()
		clk.SetAutoAdvance(true) // the backoff wait passes at once
		c := client(t, p, llm.ProviderConfig{ReadGap: 30 * time.Second}, clk)
		r := stall(t, p, c, clk, func() {
			if _, err := c.Chat(context.Background(), params("other")); err != nil {
				t.Fatal(err)
			}
		})
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := readAll(r.s); got != "ab" || r.s.Attempts() != 2 || p.Requests() != 3 {
			t.Fatalf("read %q in %d attempts (%d requests), want ab in 2 (and the other call)", got, r.s.Attempts(), p.Requests())
		}
	})
	t.Run("silence opens the breaker", func(t *testing.T) {
		t.Parallel()
		p := newProvider(t)
		p.script = []answer{p.streamAnswer(true), p.streamAnswer(false, "a", "b")}
		clk := jfasttest.NewClock()
		clk.SetAutoAdvance(true)
		c := client(t, p, llm.ProviderConfig{ReadGap: 30 * time.Second}, clk)
		r := stall(t, p, c, clk, func() {})
		if e := llmError(t, r.err); e.Kind != llm.KindTimeout || e.Attempts != 1 || p.Requests() != 1 {
			t.Fatalf("err = %v after %d requests, want a timeout after one attempt", r.err, p.Requests())
		}
		if s := c.Breaker().Snapshot(); s.State != resilience.StateOpen {
			t.Fatalf("breaker = %+v, want open", s)
		}
		_, err := c.ChatStream(context.Background(), params("hi"))
		if e := llmError(t, err); e.Kind != llm.KindCircuitOpen || p.Requests() != 1 {
			t.Fatalf("the next call: %v after %d requests, want refused unsent", err, p.Requests())
		}
	})
}

// A stream answered 500 before its first chunk is retried.
func TestStreamServerErrorIsRetried(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{status(500), p.streamAnswer(false, "ok")}
	c := client(t, p, llm.ProviderConfig{}, autoClock())
	s, err := c.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(s); got != "ok" || s.Attempts() != 2 {
		t.Fatalf("read %q in %d attempts, want ok in 2", got, s.Attempts())
	}
}

// A caller who goes away cancels the provider's request.
func TestCallerCancelCancelsProviderCall(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{p.streamAnswer(true, "a")}
	c := client(t, p, llm.ProviderConfig{}, autoClock())
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.ChatStream(ctx, params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Next() {
		t.Fatal(s.Err())
	}
	cancel()
	within(t, 10*time.Second, func() { <-p.canceled })
	if s.Next() {
		t.Fatal("a chunk after the cancel")
	}
	if e := llmError(t, s.Err()); e.Kind != llm.KindCancelled {
		t.Fatalf("error %+v, want cancelled", e)
	}
	if st := c.Breaker().Snapshot(); st.Consecutive != 0 {
		t.Fatalf("the caller's cancel counted for the breaker: %+v", st)
	}
	// And a plain call: the provider sees the request go.
	p2 := newProvider(t)
	p2.script = []answer{p2.stall()}
	c2 := client(t, p2, llm.ProviderConfig{}, autoClock())
	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c2.Chat(ctx2, params("hi")); errc <- err }()
	waitFor(t, func() bool { return p2.Requests() == 1 })
	cancel2()
	within(t, 10*time.Second, func() { <-p2.canceled; err = <-errc })
	if e := llmError(t, err); e.Kind != llm.KindCancelled || p2.Requests() != 1 {
		t.Fatalf("error %+v after %d requests, want cancelled after 1", e, p2.Requests())
	}
}

// When the provider's breaker is open, the call goes to its fallback, and
// the answer says which provider gave it.
func TestOpenBreakerFallsBack(t *testing.T) {
	t.Parallel()
	down := newProvider(t, status(503))
	up := newProvider(t)
	up.script = []answer{complete("from backup"), up.streamAnswer(false, "streamed", " backup")}
	clk := autoClock()
	backup := client(t, up, llm.ProviderConfig{Name: "backup", Model: "backup-model"}, clk)
	primary := client(t, down, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, clk, llm.WithFallback(backup))
	if _, err := primary.Chat(context.Background(), params("hi")); llmError(t, err).StatusCode != 503 {
		t.Fatalf("first call: %v, want the provider's 503", err)
	}
	if primary.Breaker().Snapshot().State != resilience.StateOpen {
		t.Fatal("the breaker did not open")
	}
	resp, err := primary.Chat(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "backup" || resp.Model != "backup-model" || resp.Text() != "from backup" || down.Requests() != 1 {
		t.Fatalf("%+v (%d requests to primary), want backup's answer with its model and no new request", resp, down.Requests())
	}
	if !strings.Contains(up.Bodies()[0], `"model":"backup-model"`) {
		t.Fatalf("the fallback was asked %s, want its own model", up.Bodies()[0])
	}
	s, err := primary.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(s); got != "streamed backup" || s.Provider() != "backup" {
		t.Fatalf("stream %q from %s, want backup's", got, s.Provider())
	}
	// Without a fallback the open breaker is a 503 with its Retry-After.
	alone := client(t, down, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{Attempts: 1, BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1}}}, clk)
	_, _ = alone.Chat(context.Background(), params("hi"))
	_, err = alone.Chat(context.Background(), params("hi"))
	e := llmError(t, err)
	pr, _ := problem.As(err)
	if e.Kind != llm.KindCircuitOpen || pr.Status != 503 || pr.RetryAfter <= 0 {
		t.Fatalf("error %+v, problem %+v; want circuit_open, 503 with Retry-After", e, pr)
	}
}

// When the provider's bulkhead is full, the call goes to its fallback.
func TestFullBulkheadFallsBack(t *testing.T) {
	t.Parallel()
	busy := newProvider(t)
	busy.script = []answer{busy.streamAnswer(true, "held")}
	up := newProvider(t, complete("from backup"))
	clk := resilience.RealClock() // the bulkhead's wait is real time here
	backup := client(t, up, llm.ProviderConfig{Name: "backup"}, clk)
	primary := client(t, busy, llm.ProviderConfig{PolicyConfig: resilience.PolicyConfig{MaxConcurrent: 1, BulkheadWait: 10 * time.Millisecond}}, clk, llm.WithFallback(backup))
	held, err := primary.ChatStream(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	resp, err := primary.Chat(context.Background(), params("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "backup" || busy.Requests() != 1 {
		t.Fatalf("answered by %s with %d requests to primary, want backup and 1", resp.Provider, busy.Requests())
	}
}

// A provider nothing answers at the TCP level (its accept queue full, so the
// connect hangs) fails within the connect timeout: a 503 naming it.
func TestUnreachableProviderFailsWithinConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := unreachableAddr(t)
	c := client(t, nil, llm.ProviderConfig{BaseURL: "http://" + addr + "/v1", ConnectTimeout: 300 * time.Millisecond, PolicyConfig: resilience.PolicyConfig{Attempts: 1}}, autoClock())
	var err error
	took := within(t, 10*time.Second, func() { _, err = c.Chat(context.Background(), params("hi")) })
	e := llmError(t, err)
	pr, _ := problem.As(err)
	if e.Kind != llm.KindTimeout || pr.Status != 503 || pr.Extensions["dependency"] != "primary" {
		t.Fatalf("error %+v, problem %+v; want a timeout, 503 naming primary", e, pr)
	}
	if took < 250*time.Millisecond || took > 5*time.Second {
		t.Fatalf("failed after %s, want about the 300ms connect timeout", took)
	}
	// Refused: at once, retried, then a 503 naming it.
	refused := jfasttest.RefusedAddr(t)
	c2 := client(t, nil, llm.ProviderConfig{BaseURL: "http://" + refused + "/v1"}, autoClock())
	_, err = c2.Chat(context.Background(), params("hi"))
	if e := llmError(t, err); e.Kind != llm.KindUnavailable || e.Attempts != 3 {
		t.Fatalf("refused: %+v, want unavailable after 3 attempts", e)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("refused: cause %v, want ECONNREFUSED", err)
	}
}

// unreachableAddr returns a loopback address whose listener never accepts
// and whose accept queue is full: a new connection's SYN is dropped, so a
// connect hangs as it does to a host that is down.
func unreachableAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*syscall.SockaddrInet4).Port}).String()
	for range 8 { // fill the queue with connections nobody accepts
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return addr // the queue is full: this one hung
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	t.Skip("the accept queue never filled: cannot make a connect hang here")
	return ""
}

// A stream that is the half-open breaker's probe closes the breaker at its
// first chunk, not when it ends: the provider's other calls go through while
// it streams. A failure of the stream after that counts as evidence of its
// own.
func TestStreamProbeClosesTheBreakerAtItsFirstChunk(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	p.script = []answer{status(503), p.streamAnswer(true, "a"), complete("b")}
	clk := jfasttest.NewClock()
	clk.SetAutoAdvance(true)
	const coolDown, readGap = 10 * time.Second, 30 * time.Second
	c := client(t, p, llm.ProviderConfig{ReadGap: readGap, PolicyConfig: resilience.PolicyConfig{
		Attempts:      1,
		BreakerConfig: resilience.BreakerConfig{BreakerFailures: 1, BreakerCoolDown: coolDown},
	}}, clk)
	if _, err := c.Chat(context.Background(), params("fail")); err == nil {
		t.Fatal("a 503 answered as a success")
	}
	if st := c.Breaker().Snapshot().State; st != resilience.StateOpen {
		t.Fatalf("breaker %s after a 503 with breaker_failures = 1, want open", st)
	}
	clk.Advance(coolDown)
	s, err := c.ChatStream(context.Background(), params("probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := c.Breaker().Snapshot().State; st != resilience.StateClosed {
		t.Fatalf("breaker %s while the probe streams after its first chunk, want closed", st)
	}
	resp, err := c.Chat(context.Background(), params("other"))
	if err != nil {
		t.Fatalf("a call while the probe streams: %v, want it sent and answered", err)
	}
	if got := resp.Text(); got != "b" {
		t.Fatalf("other call answered %q, want b", got)
	}
	if !s.Next() || s.Current().Choices[0].Delta.Content != "a" {
		t.Fatalf("the probe's first chunk: %v", s.Err())
	}
	// The stream goes silent for read_gap: a hang, counted on its own
	// ticket now that the probe's was settled.
	clk.Advance(readGap + time.Second)
	if s.Next() {
		t.Fatal("a chunk after the stream went silent")
	}
	if e := llmError(t, s.Err()); e.Kind != llm.KindTimeout {
		t.Fatalf("stream error %+v, want a timeout", e)
	}
	if st := c.Breaker().Snapshot().State; st == resilience.StateClosed {
		t.Fatal("breaker closed after the probe's stream hung: the hang was not counted")
	}
}
