package idemhttp

import (
	"math/rand/v2"
	"net/http"
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
		_, _ = decodeResponse(b, allow)
	}
	sr, err := decodeResponse(good, allow)
	if err != nil || sr.status != 201 || string(sr.body) != "body" || len(sr.headers) != 2 {
		t.Fatalf("round trip: %+v %v", sr, err)
	}
}
