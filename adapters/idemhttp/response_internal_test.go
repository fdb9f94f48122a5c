package idemhttp

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// decodeResponse must reject, never panic on, any corrupt stored value.
func TestDecodeResponseNeverPanics(t *testing.T) {
	allow := []string{"Content-Type", "Content-Encoding", "Location"}
	good := encodeResponse(201, http.Header{"Content-Type": {"a/b"}, "Location": {"/x", "/y"}}, allow, []byte("body"))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := append([]byte(nil), good[:rng.IntN(len(good)+1)]...)
		for range rng.IntN(4) {
			if len(b) > 0 {
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
		}
		if sr, err := decodeResponse(b); err == nil {
			sr.send(httptest.NewRecorder(), allow, ReplayedHeader, true)
		}
	}
	sr, err := decodeResponse(good)
	if err != nil || sr.status != 201 || string(sr.body) != "body" || sr.n != 2 || sr.values != 3 {
		t.Fatalf("round trip: %+v %v", sr, err)
	}
}

// send writes the stored headers over the writer's, the replay header and
// Content-Length; stored values do not alias one another.
func TestSendStoredResponse(t *testing.T) {
	allow := []string{"Content-Type", "Location", "X-Empty"}
	enc := encodeResponse(201, http.Header{"Content-Type": {"a/b"}, "Location": {"/x", "/y"}, "X-Empty": {""},
		"X-Dropped": {"no"}}, allow, []byte("body"))
	sr, err := decodeResponse(enc)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	w.Header().Set("Location", "/outer")
	w.Header().Set(ReplayedHeader, "false")
	w.Header().Set("X-Outer", "kept")
	sr.send(w, allow, ReplayedHeader, true)
	want := http.Header{"Content-Type": {"a/b"}, "Location": {"/x", "/y"}, "X-Empty": {""}, "X-Outer": {"kept"},
		ReplayedHeader: {"true"}, "Content-Length": {"4"}}
	if got := w.Result().Header; !reflect.DeepEqual(got, want) || w.Code != 201 || w.Body.String() != "body" {
		t.Fatalf("got %d %v %q, want 201 %v \"body\"", w.Code, got, w.Body, want)
	}
	h := w.Header()
	h["Location"] = append(h["Location"], "/z")
	h["Content-Type"][0] = "changed"
	if h.Get(ReplayedHeader) != "true" || h.Get("Content-Length") != "4" || h["Location"][0] != "/x" {
		t.Fatalf("values alias one another: %v", h)
	}

	w = httptest.NewRecorder()
	w.Header().Set(ReplayedHeader, "true")
	sr, _ = decodeResponse(encodeResponse(204, nil, allow, nil))
	sr.send(w, allow, ReplayedHeader, false)
	if got := w.Result().Header; len(got) != 0 || w.Code != 204 {
		t.Fatalf("got %d %v, want 204 and no headers", w.Code, got)
	}
}
