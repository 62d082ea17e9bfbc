package resilience

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestHTTPOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		err    error
		want   Outcome
	}{
		{200, nil, Success}, {201, nil, Success}, {304, nil, Success}, {400, nil, Success},
		{404, nil, Success}, {409, nil, Success}, {499, nil, Success}, {501, nil, Success},
		{500, nil, Ignore}, {429, nil, Ignore},
		{502, nil, Failure}, {503, nil, Failure}, {504, nil, Failure},
		{0, errors.New("dial tcp: connection refused"), Failure},
		{0, fmt.Errorf("read: %w", context.DeadlineExceeded), Failure},
		{0, fmt.Errorf("send: %w", context.Canceled), Ignore},
	} {
		if got := HTTPOutcome(tc.status, tc.err); got != tc.want {
			t.Errorf("HTTPOutcome(%d, %v) = %s, want %s", tc.status, tc.err, got, tc.want)
		}
	}
}
