package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/jfastframework/jfast/framework/resilience"
)

// batcher is the span processor between the request path and the exporter.
// A finished span goes into a bounded channel without ever waiting: when the
// channel is full (the collector is slow, hangs or is unreachable) the span is
// dropped and counted. One goroutine exports the spans in batches, each export
// bounded by export_timeout, so a hanging collector costs dropped spans and
// never a slower request.
//
// It replaces the SDK's BatchSpanProcessor, which drops the same way but does
// not expose its drop count except through its experimental self-observability
// metrics; a jfast service counts drops in its own /metrics.
type batcher struct {
	exp      sdktrace.SpanExporter
	queue    chan sdktrace.ReadOnlySpan
	maxBatch int
	interval time.Duration
	timeout  time.Duration
	clock    resilience.Clock
	metrics  *metrics
	log      *slog.Logger

	flush   chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	ctx     context.Context // ends when a shutdown runs out of time: aborts the export in flight
	cancel  context.CancelFunc
	stopped atomic.Bool
	once    sync.Once
	failing bool // the last export failed (for logging the change only); run's goroutine only
}

func newBatcher(exp sdktrace.SpanExporter, cfg Config, clock resilience.Clock, m *metrics, log *slog.Logger) *batcher {
	ctx, cancel := context.WithCancel(context.Background())
	b := &batcher{
		exp:      exp,
		queue:    make(chan sdktrace.ReadOnlySpan, cfg.MaxQueueSize),
		maxBatch: cfg.MaxExportBatchSize,
		interval: cfg.BatchTimeout,
		timeout:  cfg.ExportTimeout,
		clock:    clock,
		metrics:  m,
		log:      log,
		flush:    make(chan chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		ctx:      ctx,
		cancel:   cancel,
	}
	go b.run()
	return b
}

// OnStart implements sdktrace.SpanProcessor.
func (b *batcher) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor. It never blocks.
func (b *batcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() || b.stopped.Load() {
		return
	}
	select {
	case b.queue <- s:
	default:
		b.metrics.dropped.Inc()
	}
}

// ForceFlush implements sdktrace.SpanProcessor: it exports every span queued
// so far, within ctx.
func (b *batcher) ForceFlush(ctx context.Context) error {
	if b.stopped.Load() {
		return nil
	}
	ack := make(chan struct{})
	select {
	case b.flush <- ack:
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown implements sdktrace.SpanProcessor: it exports what is queued and
// shuts the exporter down, within ctx. When ctx ends first the export in
// flight is aborted, the rest is dropped (and counted) and ctx's error is
// returned; the goroutine has exited either way.
func (b *batcher) Shutdown(ctx context.Context) error {
	var err error
	b.once.Do(func() {
		b.stopped.Store(true)
		close(b.stop)
		select {
		case <-b.done:
		case <-ctx.Done():
			b.cancel()
			<-b.done
			err = ctx.Err()
		}
		b.cancel()
		if serr := b.exp.Shutdown(ctx); serr != nil && err == nil {
			err = serr
		}
	})
	return err
}

func (b *batcher) run() {
	defer close(b.done)
	batch := make([]sdktrace.ReadOnlySpan, 0, b.maxBatch)
	timer := b.clock.NewTimer(b.interval)
	defer func() { timer.Stop() }()
	for {
		select {
		case s := <-b.queue:
			batch = append(batch, s)
			if len(batch) >= b.maxBatch {
				batch = b.export(batch)
			}
		case <-timer.C():
			batch = b.export(batch)
			timer = b.clock.NewTimer(b.interval)
		case ack := <-b.flush:
			batch = b.drain(batch)
			close(ack)
		case <-b.stop:
			batch = b.drain(batch)
			if n := len(batch) + len(b.queue); n > 0 {
				b.metrics.dropped.Add(float64(n)) // the shutdown deadline passed
			}
			return
		}
	}
}

// drain exports everything queued now, in batches, and returns the emptied
// batch. It stops early when the shutdown deadline has passed.
func (b *batcher) drain(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	for b.ctx.Err() == nil {
		select {
		case s := <-b.queue:
			batch = append(batch, s)
			if len(batch) >= b.maxBatch {
				batch = b.export(batch)
			}
			continue
		default:
		}
		return b.export(batch)
	}
	return batch
}

func (b *batcher) export(batch []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
	err := b.exp.ExportSpans(ctx, batch)
	cancel()
	if err != nil {
		b.metrics.failed.Add(float64(len(batch)))
		if !b.failing {
			b.failing = true
			level := slog.LevelWarn
			if errors.Is(err, context.Canceled) && b.ctx.Err() != nil {
				level = slog.LevelInfo // aborted by a shutdown out of time
			}
			b.log.Log(context.Background(), level, "telemetry: span export failed; spans are dropped until the collector answers",
				slog.Int("spans", len(batch)), slog.String("error", err.Error()))
		}
	} else {
		b.metrics.exported.Add(float64(len(batch)))
		if b.failing {
			b.failing = false
			b.log.Info("telemetry: span export works again")
		}
	}
	clear(batch)
	return batch[:0]
}

var _ sdktrace.SpanProcessor = (*batcher)(nil)
