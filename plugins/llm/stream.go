package llm

import (
	"context"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/jfastframework/jfast/framework/resilience"
)

// Stream is a streamed answer whose first chunk has arrived. Read it with
// Next and Current until Next returns false, then check Err; or hand it to
// [Relay]. Close it when stopping early. The call holds its bulkhead place
// and its deadline until the stream ends or is closed. A Stream is read by
// one goroutine; to stop it from another, cancel the context given to
// ChatStream.
//
//	s, err := gpt.ChatStream(ctx, params)
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	for s.Next() {
//		for _, ch := range s.Current().Choices {
//			fmt.Print(ch.Delta.Content)
//		}
//	}
//	return s.Err()
type Stream struct {
	k       *call
	sdk     *ssestream.Stream[openai.ChatCompletionChunk]
	w       *streamWatch
	actx    context.Context
	acancel context.CancelCauseFunc
	cur     openai.ChatCompletionChunk
	pending bool // cur is the first chunk, not yet yielded
	chunks  int
	in, out int64
	err     error
	done    bool
}

// Next advances to the next chunk; it returns false when the stream ended
// or was cut (see Err).
func (s *Stream) Next() bool {
	if s.done {
		return false
	}
	if s.pending {
		s.pending = false
		s.yield()
		return true
	}
	if s.sdk.Next() {
		s.cur = s.sdk.Current()
		s.yield()
		return true
	}
	err := s.sdk.Err()
	if err == nil && !s.w.done {
		// The body ended without [DONE]: the answer may be cut short, and
		// is not passed on as whole.
		err = errNoDone
	}
	s.finish(err, false)
	return false
}

func (s *Stream) yield() {
	s.chunks++
	if u := s.cur.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
		s.in, s.out = u.PromptTokens, u.CompletionTokens
	}
}

// Current returns the chunk Next advanced to. The last chunk of a stream
// that reports usage has no choices.
func (s *Stream) Current() openai.ChatCompletionChunk { return s.cur }

// Err returns why the stream was cut, an [*Error] (a stream silent for
// read_gap is a [KindTimeout] with Chunks set), or nil when it ended
// normally (with [DONE]; a body that ends without it is a cut stream) or
// was closed.
func (s *Stream) Err() error { return s.err }

// Close ends the stream early; the provider's request is cancelled. It
// returns nil.
func (s *Stream) Close() error {
	if !s.done {
		s.finish(nil, true)
	}
	return nil
}

// Provider names the provider that answered: the one called, or its
// fallback.
func (s *Stream) Provider() string { return s.k.c.cfg.Name }

// Model returns the model that was asked.
func (s *Stream) Model() string { return s.k.model }

// Attempts returns how many requests the answering provider was sent.
func (s *Stream) Attempts() int { return s.k.attempts }

// Chunks returns how many chunks Next has yielded.
func (s *Stream) Chunks() int { return s.chunks }

// finish ends the stream once: the read-gap watch, the attempt, the
// breaker's outcome and the call.
func (s *Stream) finish(err error, closed bool) {
	s.done = true
	s.w.idle.Stop()
	_ = s.sdk.Close()
	o := resilience.Success
	var e *Error
	switch {
	case closed:
		o = resilience.Ignore // the caller stopped reading: no evidence either way
	case err != nil:
		var f failure
		f, o = s.k.classify(err, s.actx, s.chunks)
		e = f.err
	}
	s.acancel(nil)
	// The breaker counts the stream's end, once per call (a probe's was
	// counted at its first chunk: then only a failure since counts).
	s.k.run.EndTransfer(o)
	if e != nil {
		s.err = s.k.end(e, s.in, s.out)
		return
	}
	_ = s.k.end(nil, s.in, s.out)
}
