package idemhttp

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/memstore"
)

// sendResponse must reject, never panic on, any corrupt stored value, and
// write nothing of one it rejects.
func TestSendResponseNeverPanics(t *testing.T) {
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
		w := httptest.NewRecorder()
		if err := sendResponse(w, b, http.MethodPost, ReplayedHeader, true); err != nil &&
			(len(w.Header()) != 0 || w.Body.Len() != 0 || w.Flushed) {
			t.Fatalf("% x rejected after writing %v %q", b, w.Header(), w.Body)
		}
	}
	w := httptest.NewRecorder()
	err := sendResponse(w, good, http.MethodPost, ReplayedHeader, true)
	if err != nil || w.Code != 201 || w.Body.String() != "body" || len(w.Header()) != 3 || len(w.Header()["Location"]) != 2 {
		t.Fatalf("round trip: %d %v %q %v", w.Code, w.Header(), w.Body, err)
	}
}

// sendResponse writes the stored headers over the writer's and the replay header,
// and leaves the small body's Content-Length to the server
// (setContentLength); stored values do not alias one another.
func TestSendStoredResponse(t *testing.T) {
	allow := []string{"Content-Type", "Location", "X-Empty"}
	enc := encodeResponse(201, http.Header{"Content-Type": {"a/b"}, "Location": {"/x", "/y"}, "X-Empty": {""},
		"X-Dropped": {"no"}}, allow, []byte("body"))
	w := httptest.NewRecorder()
	w.Header().Set("Location", "/outer")
	w.Header().Set(ReplayedHeader, "false")
	w.Header().Set("X-Outer", "kept")
	if err := sendResponse(w, enc, http.MethodPost, ReplayedHeader, true); err != nil {
		t.Fatal(err)
	}
	want := http.Header{"Content-Type": {"a/b"}, "Location": {"/x", "/y"}, "X-Empty": {""}, "X-Outer": {"kept"},
		ReplayedHeader: {"true"}}
	if got := w.Result().Header; !reflect.DeepEqual(got, want) || w.Code != 201 || w.Body.String() != "body" {
		t.Fatalf("got %d %v %q, want 201 %v \"body\"", w.Code, got, w.Body, want)
	}
	h := w.Header()
	h["Location"] = append(h["Location"], "/z")
	h["Content-Type"][0] = "changed"
	if h.Get(ReplayedHeader) != "true" || h["Location"][0] != "/x" {
		t.Fatalf("values alias one another: %v", h)
	}

	w = httptest.NewRecorder()
	w.Header().Set(ReplayedHeader, "true")
	if err := sendResponse(w, encodeResponse(204, nil, allow, nil), http.MethodPost, ReplayedHeader, false); err != nil {
		t.Fatal(err)
	}
	if got := w.Result().Header; len(got) != 0 || w.Code != 204 {
		t.Fatalf("got %d %v, want 204 and no headers", w.Code, got)
	}
}

// FuzzStoredResponseRoundTrip stores a response with two allow-listed
// headers of any values and lengths (lengths of 128 and more take two
// bytes) and checks that send writes back exactly what was stored.
func FuzzStoredResponseRoundTrip(f *testing.F) {
	f.Add(201, "/orders/1", "a", []byte(`{"id":1}`))
	f.Add(200, string(make([]byte, 150)), string(make([]byte, 300)), []byte{})
	f.Add(299, "", "\x80\x01", []byte{0x80, 0x01})
	f.Fuzz(func(t *testing.T, status int, location, tag string, body []byte) {
		if status < 200 || status > 599 {
			return
		}
		allow := []string{"Location", "X-Tag"}
		h := http.Header{"Location": {location}, "X-Tag": {tag, location}}
		w := httptest.NewRecorder()
		if err := sendResponse(w, encodeResponse(status, h, allow, body), http.MethodPost, ReplayedHeader, false); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if w.Code != status {
			t.Errorf("status %d, want %d", w.Code, status)
		}
		for _, name := range allow {
			if got := w.Header()[name]; !reflect.DeepEqual(got, h[name]) {
				t.Errorf("%s = %q, want %q", name, got, h[name])
			}
		}
		if bodyAllowed(status) && w.Body.String() != string(body) {
			t.Errorf("body of %d bytes, want %d", w.Body.Len(), len(body))
		}
	})
}

// TestStoredResponseManyHeaders: header counts, value counts and name
// lengths of 128 and more (two-byte uvarints, which FuzzStoredResponseRoundTrip
// does not reach) replay as stored, with the replay header, and with
// Content-Length in the map for a body over serverLengthMax.
func TestStoredResponseManyHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		h := http.Header{}
		var allow []string
		for i := range rng.IntN(300) {
			name := "X-" + strconv.Itoa(i) + strings.Repeat("a", rng.IntN(200))
			allow = append(allow, name)
			vs := make([]string, rng.IntN(3))
			if rng.IntN(10) == 0 {
				vs = make([]string, 120+rng.IntN(20))
			}
			for j := range vs {
				vs[j] = strings.Repeat("v", rng.IntN(400))
			}
			h[name] = vs
		}
		body := make([]byte, rng.IntN(2*serverLengthMax))
		w := httptest.NewRecorder()
		if err := sendResponse(w, encodeResponse(201, h, allow, body), http.MethodPost, ReplayedHeader, true); err != nil {
			t.Fatalf("%d headers: %v", len(allow), err)
		}
		got := w.Header()
		var wantLength []string
		if len(body) > serverLengthMax {
			wantLength = []string{strconv.Itoa(len(body))}
		}
		if !reflect.DeepEqual(got["Content-Length"], wantLength) || got.Get(ReplayedHeader) != "true" || w.Code != 201 {
			t.Fatalf("%d, %d bytes, Content-Length %q, %s %q", w.Code, len(body), got["Content-Length"], ReplayedHeader, got.Get(ReplayedHeader))
		}
		for _, name := range allow {
			if len(got[name]) != len(h[name]) || (len(h[name]) > 0 && !reflect.DeepEqual(got[name], h[name])) {
				t.Fatalf("%s: %d values, want %d", name, len(got[name]), len(h[name]))
			}
		}
	}
}

// A stored response found corrupt anywhere, up to its last value, is
// answered 500 with a problem that holds nothing of it (status, headers,
// body), and the log names the cause: replay checks the whole record
// before it writes to the client.
func TestCorruptStoredResponseWritesNothingOfIt(t *testing.T) {
	s, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := idemkit.New(s, idemkit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rt, err := newRoute(e, []Option{WithPrincipal(TrustedHeaderPrincipal("X-User")), WithReplayHeaders("X-Tag"),
		WithLogger(slog.New(slog.NewTextHandler(&log, nil)))}, modeKey)
	if err != nil {
		t.Fatal(err)
	}
	allow := []string{"Location", "X-Tag"}
	body := "stored body"
	good := encodeResponse(201, http.Header{"Location": {"/x"}, "X-Tag": {"first", "last"}}, allow, []byte(body))
	end := len(good) - len(body)  // the headers end here
	last := end - len("last") - 1 // the last value's length
	var bad [][]byte
	for n := range end {
		bad = append(bad, good[:n]) // cut in the headers
	}
	for _, c := range []byte{0x7f, 0x80, 0xff, byte(len("last") + len(body) + 1)} {
		b := bytes.Clone(good)
		b[last] = c // the last value overruns the record, or its length does
		bad = append(bad, b)
	}
	b := bytes.Clone(good)
	b[3]++ // one header more than stored
	bad = append(bad, b)
	for _, v := range bad {
		log.Reset()
		w := httptest.NewRecorder()
		w.Header().Set(ReplayedHeader, "true")
		rt.replay(w, httptest.NewRequest(http.MethodPost, "/orders", nil), v, "k")
		h := w.Result().Header
		if w.Code != http.StatusInternalServerError || h.Get("Content-Type") != ProblemContentType ||
			h["Location"] != nil || h["X-Tag"] != nil || h[ReplayedHeader] != nil || strings.Contains(w.Body.String(), body) {
			t.Fatalf("% x: %d %v %q", v, w.Code, h, w.Body)
		}
		if !strings.Contains(log.String(), "corrupt stored response") {
			t.Fatalf("% x: log %q", v, log.String())
		}
	}
	w := httptest.NewRecorder()
	rt.replay(w, httptest.NewRequest(http.MethodPost, "/orders", nil), good, "k")
	if w.Code != 201 || w.Header()["X-Tag"][1] != "last" || w.Body.String() != body {
		t.Fatalf("good record: %d %v %q", w.Code, w.Header(), w.Body)
	}
}
