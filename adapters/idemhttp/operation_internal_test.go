package idemhttp

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// appendOperation must spell the operation exactly as stored records'
// fingerprints do (method, pattern and escaped path, space-separated; the
// method once when the pattern names it), whatever its length, or a retry
// of a stored request would get 422.
func TestAppendOperationKeepsFingerprints(t *testing.T) {
	long := "/" + strings.Repeat("segment/", 30)
	for _, tc := range []struct{ method, target, pattern string }{
		{"POST", "/orders", "POST /orders"},
		{"POST", "/orders", ""},
		{"PATCH", "/orders/42", "PATCH /orders/{id}"},
		{"POST", "/caf%C3%A9/a%2Fb?x=1", "POST /{name}/{rest}"},
		{"POST", "/with%20space", ""},
		{"POST", long, "POST /"},
		{"POST", long + long, "POST " + long},
		{"HEAD", "/orders", "GET /orders"}, // GET patterns also serve HEAD
		{"POST", "/orders", "POST"},
		{"POST", "/orders", "POSTX /orders"},
		{"GET", "/orders", "example.com/orders"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		r.Pattern = tc.pattern
		var buf [128]byte
		got := string(appendOperation(buf[:0], r))
		want := r.Method + " " + r.Pattern + " " + r.URL.EscapedPath()
		if strings.HasPrefix(r.Pattern, r.Method+" ") {
			want = r.Pattern + " " + r.URL.EscapedPath()
		}
		if got != want {
			t.Errorf("appendOperation = %q, want %q", got, want)
		}
	}
}
