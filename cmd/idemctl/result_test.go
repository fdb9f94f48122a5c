package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/boltstore"
)

// seedHTTP stores, through idemhttp's middleware, the response of one
// POST for each key of bodies (as a service would) in a bolt file, and
// returns its URL.
func seedHTTP(t *testing.T, bodies map[string][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := idemkit.New(st, idemkit.WithObserver(nil))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := idemhttp.Idempotency(e, idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User-Id")),
		idemhttp.WithReplayHeaders("Content-Type", "Location"))
	if err != nil {
		t.Fatal(err)
	}
	for key, body := range bodies {
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Location", "/orders/7")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		}))
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{}"))
		r.Header.Set("X-User-Id", user)
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("seeding %s: %d %s", key, w.Code, w.Body)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return "bolt://" + path
}

// get -result decodes a stored HTTP response: status, headers, and the
// body as text when it is UTF-8, base64 otherwise; flags may follow the
// key (issue 28, item 7c).
func TestGetResultDecodesHTTPResponse(t *testing.T) {
	binary := []byte{0xff, 0x00, 0xfe, 'x'}
	url := seedHTTP(t, map[string][]byte{"order-text": []byte(`{"id":7}`), "order-bin": binary})

	code, out, errOut := ctl(t, "-store", url, "get", "http:order-text", "-scope", user, "-result")
	if code != exitOK {
		t.Fatalf("get KEY -scope -result = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"status", "201", "Location: /orders/7", "Content-Type: application/octet-stream", `{"id":7}`} {
		if !strings.Contains(out, want) {
			t.Errorf("get -result does not show %q:\n%s", want, out)
		}
	}

	code, out, errOut = ctl(t, "-store", url, "-json", "get", "-scope", user, "-result", "http:order-bin")
	if code != exitOK {
		t.Fatalf("get -json -result = %d\n%s%s", code, out, errOut)
	}
	var v struct {
		Response *struct {
			Status     int                 `json:"status"`
			Header     map[string][]string `json:"header"`
			Body       *string             `json:"body"`
			BodyBase64 *string             `json:"body_base64"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Response == nil {
		t.Fatalf("get -json -result: %v\n%s", err, out)
	}
	if v.Response.Status != 201 || v.Response.Body != nil || v.Response.BodyBase64 == nil || *v.Response.BodyBase64 != base64.StdEncoding.EncodeToString(binary) {
		t.Errorf("binary body: %+v\n%s", v.Response, out)
	}
	if got := v.Response.Header["Location"]; len(got) != 1 || got[0] != "/orders/7" {
		t.Errorf("headers: %v", v.Response.Header)
	}
}
