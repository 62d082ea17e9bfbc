// Package redislog sends go-redis's own log lines (its connection pool's and
// pub/sub's messages, which it otherwise prints to standard error with the
// standard library's log package) through a jfast service's slog logger, so
// every line is structured and carries the service's fields.
//
// go-redis has one logger per process. [Use] installs a forwarder once and
// points it at the logger of the App that started last: in a process running
// several Apps (tests), go-redis's lines go to the latest one.
package redislog

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

var (
	current atomic.Pointer[slog.Logger]
	install sync.Once
)

// Use makes l the logger of go-redis's messages in this process.
func Use(l *slog.Logger) {
	current.Store(l)
	install.Do(func() { redis.SetLogger(forwarder{}) })
}

// forwarder is go-redis's Logging: one warning per line, with the context
// go-redis passes (the request's, when there is one).
type forwarder struct{}

func (forwarder) Printf(ctx context.Context, format string, v ...any) {
	if l := current.Load(); l != nil {
		// Every message go-redis logs is about a connection it gave up on
		// or could not make: a warning.
		l.WarnContext(ctx, "redis: "+fmt.Sprintf(format, v...), slog.String("component", "go-redis"))
	}
}
