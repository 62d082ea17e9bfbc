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
	return h.Handler.Handle(ctx, maskRecord(rec))
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i], _ = maskAttr(a)
	}
	return contextHandler{h.Handler.WithAttrs(masked), h.sources}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name), h.sources}
}

// newLogger returns the service's logger: JSON in production, text elsewhere, with
// the request ID of the context on every record, and every record masked
// (maskRecord).
func newLogger(cfg AppConfig, out io.Writer, sources *atomic.Pointer[[]LogSource]) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated at boot
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if cfg.Production() {
		h = slog.NewJSONHandler(out, opts)
	} else {
		h = slog.NewTextHandler(out, opts)
	}
	return slog.New(contextHandler{h, sources}).With(slog.String("service", cfg.Name))
}

// maskRecord returns rec with its message, every string and the text of every
// error or fmt.Stringer value through MaskSecrets, so a DSN in an error, a URL
// with a password in a message or a panic value that holds one reaches the log
// masked. Other values (numbers, times, lists and maps logged with slog.Any)
// keep their shape. A record with nothing to mask is returned as it is,
// without allocating: the access log pays two scans per string.
func maskRecord(rec slog.Record) slog.Record {
	dirty := MaskSecrets(rec.Message) != rec.Message
	if !dirty {
		rec.Attrs(func(a slog.Attr) bool {
			_, dirty = maskAttr(a)
			return !dirty
		})
	}
	if !dirty {
		return rec
	}
	out := slog.NewRecord(rec.Time, rec.Level, MaskSecrets(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		a, _ = maskAttr(a)
		out.AddAttrs(a)
		return true
	})
	return out
}

// maskAttr returns a with its value masked, and whether that changed it:
// the whole value when the key names a secret (secretAttr), else what
// MaskSecrets finds in its text.
func maskAttr(a slog.Attr) (slog.Attr, bool) {
	if secretAttr(a) {
		return slog.String(a.Key, Masked), true
	}
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		if m := MaskSecrets(s); m != s {
			return slog.String(a.Key, m), true
		}
	case slog.KindAny:
		var s string
		switch v := a.Value.Any().(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		default:
			return a, false
		}
		if m := MaskSecrets(s); m != s {
			return slog.String(a.Key, m), true
		}
	case slog.KindGroup:
		group := a.Value.Group()
		var out []slog.Attr
		for i, g := range group {
			m, changed := maskAttr(g)
			if changed && out == nil {
				out = append([]slog.Attr(nil), group...)
			}
			if out != nil {
				out[i] = m
			}
		}
		if out != nil {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
		}
	case slog.KindLogValuer:
		if r := a.Value.Resolve(); r.Kind() != slog.KindLogValuer {
			return maskAttr(slog.Attr{Key: a.Key, Value: r})
		}
	}
	return a, false
}

// secretAttr reports whether a is a secret by its key, the way a
// configuration key is ([IsSecretKey]: password, token, api_key, …), as in
// logger.Info("connecting", "password", pw): MaskSecrets, which reads text,
// would see only the value. A boolean, a duration or a time holds no secret
// (slog.Bool("admin_token", set) says whether one is set), nor does an empty
// string; any other value, a group's included, is masked whole.
func secretAttr(a slog.Attr) bool {
	switch a.Value.Kind() {
	case slog.KindBool, slog.KindDuration, slog.KindTime:
		return false
	case slog.KindString:
		if a.Value.String() == "" {
			return false
		}
	}
	return IsSecretKey(a.Key)
}
