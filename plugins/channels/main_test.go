package channels

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/jfastframework/jfast/requestid"
)

// Subscriptions, handler runs, SSE streams, the cache plugin's pool and the
// private redis-server processes must all be gone when the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func requestIDOf(ctx context.Context) string { return requestid.FromContext(ctx) }

func requestIDNewContext(ctx context.Context, id string) context.Context {
	return requestid.NewContext(ctx, id)
}
