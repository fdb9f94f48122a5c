package idemhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store/memstore"
)

// trivial is the handler every benchmark runs: a small JSON 201.
var trivial = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/1")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":1,"status":"created"}`))
})

func benchEngine(b *testing.B) *idemkit.Engine {
	return testkit.NewEngineOn(b, testkit.NewMem(b, memstore.WithCapacity(1<<20)))
}

// benchMux registers trivial, wrapped by mw when it is not nil.
func benchMux(mw func(http.Handler) http.Handler) *http.ServeMux {
	var h http.Handler = trivial
	if mw != nil {
		h = mw(trivial)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", h)
	return mux
}

var benchBodies = func() [][]byte {
	out := make([][]byte, 1024)
	for i := range out {
		out[i] = []byte(`{"sku":"sku-` + strconv.Itoa(i) + `","qty":1,"note":"benchmark order"}`)
	}
	return out
}()

// round is one in-process request: build it, serve it, check the status.
func round(b *testing.B, h http.Handler, body []byte, header, value string, want int) {
	r := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(body))
	r.Header.Set(userHeader, "alice")
	r.Header.Set(header, value)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != want {
		b.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
	}
}

func BenchmarkBare(b *testing.B) {
	h := benchMux(nil)
	b.ReportAllocs()
	for i := range b.N {
		round(b, h, benchBodies[i%len(benchBodies)], idemhttp.DefaultKeyHeader, "k", 201)
	}
}

func BenchmarkIdempotency(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		h := benchMux(mustMiddleware(b)(idemhttp.Idempotency(benchEngine(b), byUser)))
		b.ReportAllocs()
		for i := range b.N {
			round(b, h, benchBodies[i%len(benchBodies)], idemhttp.DefaultKeyHeader, strconv.Itoa(i), 201)
		}
	})
	b.Run("replay", func(b *testing.B) {
		h := benchMux(mustMiddleware(b)(idemhttp.Idempotency(benchEngine(b), byUser)))
		round(b, h, benchBodies[0], idemhttp.DefaultKeyHeader, "k", 201)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			round(b, h, benchBodies[0], idemhttp.DefaultKeyHeader, "k", 201)
		}
	})
}

func BenchmarkWindow(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		// Every request is new: the window is keyed by the body, which
		// carries the iteration number.
		h := benchMux(mustMiddleware(b)(idemhttp.Window(benchEngine(b), byUser)))
		b.ReportAllocs()
		for i := range b.N {
			round(b, h, []byte(`{"sku":"sku-`+strconv.Itoa(i)+`","qty":1,"note":"benchmark order"}`), "X-Unused", "k", 201)
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		h := benchMux(mustMiddleware(b)(idemhttp.Window(benchEngine(b), byUser)))
		round(b, h, benchBodies[0], "X-Unused", "k", 201)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			round(b, h, benchBodies[0], "X-Unused", "k", 409)
		}
	})
}

func BenchmarkToken(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		e := benchEngine(b)
		h := benchMux(mustMiddleware(b)(idemhttp.Token(e, byUser)))
		var tokens []string
		b.ReportAllocs()
		for i := range b.N {
			if i%len(benchBodies) == 0 {
				b.StopTimer()
				tokens = issueTokens(b, e, len(benchBodies))
				b.StartTimer()
			}
			round(b, h, benchBodies[i%len(benchBodies)], idemhttp.DefaultTokenHeader, tokens[i%len(tokens)], 201)
		}
	})
	b.Run("replay", func(b *testing.B) {
		e := benchEngine(b)
		h := benchMux(mustMiddleware(b)(idemhttp.Token(e, byUser)))
		tok := issueTokens(b, e, 1)[0]
		round(b, h, benchBodies[0], idemhttp.DefaultTokenHeader, tok, 201)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			round(b, h, benchBodies[0], idemhttp.DefaultTokenHeader, tok, 201)
		}
	})
}

func issueTokens(b *testing.B, e *idemkit.Engine, n int) []string {
	out := make([]string, n)
	for i := range out {
		tok, err := e.IssueToken(context.Background(), "alice")
		if err != nil {
			b.Fatal(err)
		}
		out[i] = tok.Value
	}
	return out
}

// BenchmarkLoopback sends real requests over a loopback connection.
func BenchmarkLoopback(b *testing.B) {
	run := func(b *testing.B, h http.Handler, key func(i int) string) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		client := srv.Client()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			body := benchBodies[0]
			r, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", bytes.NewReader(body))
			r.Header.Set(userHeader, "alice")
			r.Header.Set(idemhttp.DefaultKeyHeader, key(i))
			resp, err := client.Do(r)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	same := func(int) string { return "k" }
	b.Run("bare", func(b *testing.B) { run(b, benchMux(nil), same) })
	b.Run("idempotency-first", func(b *testing.B) {
		run(b, benchMux(mustMiddleware(b)(idemhttp.Idempotency(benchEngine(b), byUser))), strconv.Itoa)
	})
	b.Run("idempotency-replay", func(b *testing.B) {
		run(b, benchMux(mustMiddleware(b)(idemhttp.Idempotency(benchEngine(b), byUser))), same)
	})
}
