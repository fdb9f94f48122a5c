package idemhttp

import (
	"net/http"
	"net/http/httptest"
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
		setContentLength(h, c.method, c.status, c.n, false)
		if got := h["Content-Length"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v %s %d, %d bytes: Content-Length %q, want %q", c.h, c.method, c.status, c.n, got, c.want)
		}
	}
}

// sendResponse leaves a small body's length to the server unless the writer's map
// or the stored headers hold a framing header, whether the map was empty
// (and is not looked up) or not.
func TestSendContentLength(t *testing.T) {
	allow := []string{"Content-Type", "Content-Length", "Trailer"}
	for _, c := range []struct {
		outer, stored http.Header
		n             int
		want          []string
	}{
		{nil, http.Header{"Content-Type": {"a/b"}}, 5, nil},
		{nil, http.Header{"Content-Type": {"a/b"}}, 3000, []string{"3000"}},
		{nil, http.Header{"Trailer": {"X-Sum"}}, 5, []string{"5"}},
		{nil, http.Header{"Content-Length": {"9"}}, 5, nil},
		{http.Header{"Transfer-Encoding": {"identity"}}, http.Header{"Content-Type": {"a/b"}}, 5, []string{"5"}},
		{http.Header{"Trailer": {"X-Sum"}}, nil, 5, []string{"5"}},
		{http.Header{"Content-Length": {"9"}}, nil, 5, nil},
		{http.Header{"X-Outer": {"o"}}, nil, 5, nil},
	} {
		w := httptest.NewRecorder()
		for k, vs := range c.outer {
			w.Header()[k] = vs
		}
		err := sendResponse(w, encodeResponse(200, c.stored, allow, make([]byte, c.n)), http.MethodPost, ReplayedHeader, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Header()["Content-Length"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("outer %v, stored %v, %d bytes: Content-Length %q, want %q", c.outer, c.stored, c.n, got, c.want)
		}
	}
}
