package idemhttp

import (
	"net/http"
	"reflect"
	"testing"
)

// setContentLength leaves the length to the server only where net/http's
// servers send it themselves, and otherwise puts it in the header map.
func TestSetContentLength(t *testing.T) {
	for _, c := range []struct {
		h      http.Header
		method string
		status int
		n      int
		want   []string // Content-Length in h afterwards
	}{
		{nil, http.MethodPost, 201, 0, nil},
		{nil, http.MethodPost, 201, 5, nil},
		{http.Header{"Content-Length": {"9"}}, http.MethodPost, 201, 5, nil}, // a handler's own is removed
		{nil, http.MethodPost, 201, serverLengthMax, nil},
		{nil, http.MethodPost, 201, serverLengthMax + 1, []string{"2049"}},
		{nil, http.MethodHead, 200, 0, []string{"0"}},
		{nil, http.MethodHead, 200, 5, nil},
		{http.Header{"Transfer-Encoding": {"identity"}}, http.MethodPost, 200, 5, []string{"5"}},
		{http.Header{"Trailer": {"X-Sum"}}, http.MethodPost, 200, 5, []string{"5"}},
		{http.Header{"Content-Length": {"9"}}, http.MethodPost, 204, 0, []string{"9"}}, // no body: left as it is
		{nil, http.MethodPost, 304, 0, nil},
	} {
		h := c.h
		if h == nil {
			h = http.Header{}
		}
		h = h.Clone()
		setContentLength(h, c.method, c.status, c.n)
		if got := h["Content-Length"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v %s %d, %d bytes: Content-Length %q, want %q", c.h, c.method, c.status, c.n, got, c.want)
		}
	}
}
