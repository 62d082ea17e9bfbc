package redislog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A line go-redis logs reaches the service's logger, structured and with its
// fields, instead of standard error.
func TestGoRedisLinesGoThroughTheServiceLogger(t *testing.T) {
	var logs lockedBuffer
	Use(slog.New(slog.NewTextHandler(&logs, nil)).With(slog.String("service", "orders")))

	forwarder{}.Printf(context.Background(), "pool: %s", "a message")
	if got := logs.String(); !strings.Contains(got, `level=WARN msg="redis: pool: a message" service=orders component=go-redis`) {
		t.Fatalf("forwarded line:\n%s", got)
	}

}
