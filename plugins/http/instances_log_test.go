package http_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	jhttp "github.com/jfastframework/jfast/plugins/http"
)

// lineBuffer keeps the lines a logger writes, safe for the goroutines of
// health checks and resolutions.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lineBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// The lines about an upstream's instances (health checks, resolutions)
// name the upstream once.
func TestInstanceLogLinesNameTheUpstreamOnce(t *testing.T) {
	t.Parallel()
	var buf lineBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))

	_, u := replicas(1, t, status(503)) // its /ready too
	u.Name, u.HealthPath = "checked", "/ready"
	newClient(t, u, jhttp.WithLogger(log))

	table := &dnsTable{answers: map[string][]string{"orders-instances": {"127.0.0.1"}}}
	c, _, _ := newClient(t, jhttp.Upstream{Name: "discovered", BaseURL: "http://orders-instances:8000", Discover: true},
		jhttp.WithLookup(table.lookup), jhttp.WithLogger(log))
	table.set("orders-instances") // no address now: the resolution fails and keeps the set
	if err := c.Instances().Resolve(t.Context()); err == nil {
		t.Fatal("a resolution finding no address did not fail")
	}

	seen := map[string]bool{}
	for _, line := range buf.lines() {
		for _, msg := range []string{"upstream instance unhealthy", "upstream instances changed", "upstream instances not resolved"} {
			if strings.Contains(line, `msg="`+msg) {
				seen[msg] = true
			}
		}
		if n := strings.Count(line, " upstream="); n != 1 {
			t.Errorf("%d upstream= in %s", n, line)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("lines seen %v, want the three kinds:\n%s", seen, strings.Join(buf.lines(), "\n"))
	}
}
