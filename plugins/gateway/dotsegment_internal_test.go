package gateway

import "testing"

// hasDotSegment finds a dot segment in every form an upstream that
// normalises paths would resolve, and passes dots inside a segment.
func TestHasDotSegment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		dot  bool
	}{
		{"/api/orders/1", false},
		{"/api/orders/../billing", true},
		{"/api/orders/./x", true},
		{"/api/orders/x/..", true},
		{"/api/orders/%2E%2E/x", true},
		{"/api/orders/.%2e/x", true},
		{"/api/orders/..%2Fx", true},
		{"/api/orders/..%5Cx", true},
		{`/api/orders/..\x`, true},
		// Path parameters (Tomcat removes them before resolving dot
		// segments): "..;" is "..".
		{"/api/keep/..;/x", true},
		{"/api/keep/..;jsessionid=1/x", true},
		{"/api/keep/.;/x", true},
		{"/api/keep/x/..;", true},
		{"/api/keep/%2E%2E;/x", true},
		{"/api/keep/.%2e;a=b/x", true},
		{"/api/keep/..%3B/x", true},
		{"/api/keep/x%2F..;%2Fy", true},
		{"/api/keep/..;a;b/x", true},
		// Dots inside a segment, or before a parameter that is not all of
		// the segment's name, pass.
		{"/api/keep/a..b", false},
		{"/api/keep/...;/x", false},
		{"/api/keep/a..;/x", false},
		{"/api/keep/;../x", false},
		{"/api/keep/v1.2;rev=3", false},
		{"/api/keep/.well-known/x", false},
		{"/api/keep/%252E%252E;/x", false}, // the literal text %2E%2E
	} {
		if got := hasDotSegment(tc.path); got != tc.dot {
			t.Errorf("hasDotSegment(%q) = %v, want %v", tc.path, got, tc.dot)
		}
	}
}
