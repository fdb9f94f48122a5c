package idemhttp

import (
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
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

// appendEscapedPath must append exactly what EscapedPath returns, for
// paths of every byte, with and without a RawPath, and for "*".
func TestAppendEscapedPathIsEscapedPath(t *testing.T) {
	check := func(u *url.URL) {
		t.Helper()
		if got, want := string(appendEscapedPath([]byte("x "), u)), "x "+u.EscapedPath(); got != want {
			t.Fatalf("path %q, raw %q: %q, want %q", u.Path, u.RawPath, got, want)
		}
	}
	plain := 0
	for c := range 256 {
		for _, p := range []string{string([]byte{byte(c)}), "/orders/" + string([]byte{byte(c)}) + "/x"} {
			check(&url.URL{Path: p})
		}
		if plainPathByte[c] {
			plain++
		}
	}
	if plain < 64 || plainPathByte['?'] || plainPathByte['%'] || plainPathByte[' '] || plainPathByte[0x80] || !plainPathByte['/'] {
		t.Fatalf("%d plain bytes; ? %% space 0x80 / : %v %v %v %v %v", plain, plainPathByte['?'], plainPathByte['%'],
			plainPathByte[' '], plainPathByte[0x80], plainPathByte['/'])
	}
	for _, p := range []string{"", "*", "/*", "/", "/orders", "/a b", "/café", "/a%2Fb", "/a?b", "/a;b=c", "/~user/x_y-z.json"} {
		check(&url.URL{Path: p})
	}
	for _, target := range []string{"/caf%C3%A9/a%2Fb", "/a%2fb", "/a%20b", "/orders/1", "/%7Euser"} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		check(u)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := "/aZ09-._~!$&'()*+,;=:@%? \\\"<>#[]^`{|}\x00\x7f\x80\xc3\xa9"
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(&url.URL{Path: string(b)})
		if u, err := url.Parse("/" + string(b)); err == nil {
			check(u)
		}
	}
}
