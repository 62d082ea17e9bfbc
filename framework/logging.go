package framework

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/jfastframework/jfast/requestid"
)

// LogSource returns attributes taken from a context to add to a log record:
// telemetry adds trace_id and span_id this way.
type LogSource func(ctx context.Context) []slog.Attr

// contextHandler adds the request ID of the context, and the attributes of every
// registered LogSource, to each record logged with a context.
type contextHandler struct {
	slog.Handler
	sources *atomic.Pointer[[]LogSource]
}

func (h contextHandler) Handle(ctx context.Context, rec slog.Record) error {
	if ctx != nil {
		if id := requestid.FromContext(ctx); id != "" {
			rec.AddAttrs(slog.String("request_id", id))
		}
		if srcs := h.sources.Load(); srcs != nil {
			for _, src := range *srcs {
				if attrs := src(ctx); len(attrs) > 0 {
					rec.AddAttrs(attrs...)
				}
			}
		}
	}
	return h.Handler.Handle(ctx, rec)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs), h.sources}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name), h.sources}
}

// newLogger returns the service's logger: JSON in production, text elsewhere, with
// the request ID of the context on every record, and every message and value
// through maskAttr.
func newLogger(cfg AppConfig, out io.Writer, sources *atomic.Pointer[[]LogSource]) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated at boot
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: maskAttr}
	var h slog.Handler
	if cfg.Production() {
		h = slog.NewJSONHandler(out, opts)
	} else {
		h = slog.NewTextHandler(out, opts)
	}
	return slog.New(contextHandler{h, sources}).With(slog.String("service", cfg.Name))
}

// maskAttr is the logger's ReplaceAttr: the message, every string and the text
// of every error or fmt.Stringer value go through MaskSecrets, so a DSN in an
// error, a URL with a password in a message or a panic value that holds one
// reaches the log masked. Other values (numbers, times, lists, maps logged
// with slog.Any) are left as they are, to keep their shape in JSON.
func maskAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		if m := MaskSecrets(s); m != s {
			a.Value = slog.StringValue(m)
		}
	case slog.KindAny:
		var s string
		switch v := a.Value.Any().(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		default:
			return a
		}
		if m := MaskSecrets(s); m != s {
			a.Value = slog.StringValue(m)
		}
	}
	return a
}
