package idemhttp

import (
	"bytes"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// DecodeStoredResponse reads back what the middleware stores for a key:
// the status, the allow-listed headers and the body, as copies; a terminal
// record says why no response was stored; anything else is an error.
func TestDecodeStoredResponse(t *testing.T) {
	allow := []string{"Content-Type", "Location"}
	h := http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/7", "/x"}, "Set-Cookie": {"s=1"}}
	stored := encodeResponse(201, h, allow, []byte(`{"id":7}`))
	got, err := DecodeStoredResponse(stored)
	if err != nil {
		t.Fatal(err)
	}
	want := StoredResponse{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/7", "/x"}}, Body: []byte(`{"id":7}`)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeStoredResponse = %+v, want %+v", got, want)
	}
	copy(stored, bytes.Repeat([]byte{0}, len(stored)))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the decoded response aliases the stored value: %+v", got)
	}

	got, err = DecodeStoredResponse(httpcore.TerminalRecord(httpcore.ReasonStreamed))
	if err != nil || got.Status != 0 || !strings.Contains(got.NotStored, "streamed") {
		t.Errorf("terminal record: %+v, %v; want NotStored saying streamed", got, err)
	}

	for _, bad := range [][]byte{nil, []byte(`{"id":7}`), stored[:2], {1, 0, 0, 0}} {
		if _, err := DecodeStoredResponse(bad); !errors.Is(err, ErrNotStoredResponse) {
			t.Errorf("DecodeStoredResponse(%q) = %v, want ErrNotStoredResponse", bad, err)
		}
	}
}
