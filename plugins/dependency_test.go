package plugins_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/channels"
	jgrpc "github.com/jfastframework/jfast/plugins/grpc"
	jhttp "github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/problem"
)

// TestDependency503sNameIt: the outage errors of every plugin render, through
// the one place problem+json is decided (problem.From), as a 503 titled with
// RFC 9110's reason phrase that names what failed in the dependency member.
// The db, storage, auth (JWKS), queue, mail and idempotency plugins raise
// problem.DependencyError itself; the others have error types of their own.
func TestDependency503sNameIt(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 10.0.0.7:5432: connect: connection refused")
	for _, c := range []struct {
		plugin, want string
		err          error
	}{
		{"db", "db", &problem.DependencyError{Dependency: "db", Err: cause}},
		{"storage", "s3", &problem.DependencyError{Dependency: "s3", Err: cause}},
		{"auth", "jwks", &problem.DependencyError{Dependency: "jwks", Err: cause}},
		{"queue", "queue", &problem.DependencyError{Dependency: "queue", Err: cause}},
		{"mail", "queue", &problem.DependencyError{Dependency: "queue", Err: cause}},
		{"idempotency", "db", &problem.DependencyError{Dependency: "db", Err: cause}},
		{"cache", "cache", &cache.UnavailableError{Err: cause}},
		{"channels", "channels", &channels.UnavailableError{Channel: "order.paid", Err: cause}},
		{"http", "billing", &jhttp.UpstreamError{Upstream: "billing", Err: cause}},
		{"grpc", "inventory", &jgrpc.Error{Upstream: "inventory", Method: "/shop.Inventory/Reserve", Code: codes.Unavailable, Kind: jgrpc.KindStatus, Err: cause}},
		{"grpc, breaker open", "inventory", &jgrpc.Error{Upstream: "inventory", Code: codes.Unavailable, Kind: jgrpc.KindCircuitOpen, RetryAfter: 3 * time.Second, Err: cause}},
		{"llm", "openai", &llm.Error{Provider: "openai", Kind: llm.KindUnavailable, Err: cause}},
	} {
		w := httptest.NewRecorder()
		problem.WriteError(w, httptest.NewRequest(http.MethodGet, "/orders/1", nil), c.err)
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: body %s: %v", c.plugin, w.Body, err)
		}
		if w.Code != http.StatusServiceUnavailable || body["title"] != "Service Unavailable" || body["dependency"] != c.want {
			t.Errorf("%s: %d %s, want 503 \"Service Unavailable\" with dependency %q", c.plugin, w.Code, w.Body, c.want)
		}
		if b := w.Body.String(); strings.Contains(b, "10.0.0.7") {
			t.Errorf("%s: the cause's address reached the client: %s", c.plugin, b)
		}
	}
}
