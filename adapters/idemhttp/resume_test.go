package idemhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// resumeRoute is a route with WithResume in front of a handler in two
// recovery points, "reserve" and "charge", that answers 201 with what it
// saw: the user, the body and the charge step's derived key. Its first
// run hangs after "charge" when hang is set, as a process that died
// there (its lease then ends: no heartbeat).
type resumeRoute struct {
	e                  *idemkit.Engine
	s                  store.Scanner
	opts               []idemhttp.Option
	h                  http.Handler
	mw                 http.Handler
	reserved, charged  atomic.Int32
	hang               chan struct{} // closed to let a hung run go on
	hangs              atomic.Bool
	sawAuth, sawCookie atomic.Bool
}

func newResumeRoute(t *testing.T) *resumeRoute {
	t.Helper()
	s := testkit.NewMem(t)
	rr := &resumeRoute{e: testkit.NewEngineOn(t, s, idemkit.WithLease(time.Second), idemkit.WithoutHeartbeat()), s: s, hang: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-rr.hang:
		default:
			close(rr.hang)
		}
	})
	rr.opts = []idemhttp.Option{byUser, idemhttp.WithResume("place-order", "Content-Type", userHeader)}
	rr.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		body, _ := io.ReadAll(r.Body)
		rr.sawAuth.Store(rr.sawAuth.Load() || r.Header.Get("Authorization") != "")
		rr.sawCookie.Store(rr.sawCookie.Load() || r.Header.Get("Cookie") != "")
		if _, err := idemkit.Step(ctx, "reserve", func(context.Context) ([]byte, error) {
			rr.reserved.Add(1)
			return nil, nil
		}); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		key, err := idemkit.Step(ctx, "charge", func(ctx context.Context) ([]byte, error) {
			rr.charged.Add(1)
			k, _ := idemkit.StepKey(ctx)
			return []byte(k), nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if rr.hangs.CompareAndSwap(true, false) {
			<-rr.hang
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s %s?%s %s", r.Header.Get(userHeader), body, key, r.Method, r.URL.RawQuery, r.Header.Get("Content-Type"))
	})
	mw, err := idemhttp.Idempotency(rr.e, rr.opts...)
	if err != nil {
		t.Fatal(err)
	}
	rr.mw = mw(rr.h)
	return rr
}

func resumeRequest() *http.Request {
	r := req{target: "/orders?sku=pen", body: `{"qty":2}`, user: "alice", key: "k1", header: http.Header{
		"Content-Type": {"application/json"}, "Authorization": {"Bearer s3cret"}, "Cookie": {"session=s3cret"}}}.build()
	return r
}

// A request whose process died between two recovery points, and whose
// client never came back, is finished by the completer with the function
// Resumer makes: the handler sees the stored method, target, headers and
// body, its recorded step is skipped, and the client's late retry is
// answered with the completer's response. Credentials are not stored.
func TestResumerFinishesAnAbandonedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rr := newResumeRoute(t)
		rr.hangs.Store(true)
		first := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); rr.mw.ServeHTTP(first, resumeRequest()) }()
		synctest.Wait() // hung after "charge"
		time.Sleep(time.Minute)

		if !rr.sawAuth.Load() || !rr.sawCookie.Load() {
			t.Fatal("the first run did not see the client's credentials")
		}
		rr.sawAuth.Store(false)
		rr.sawCookie.Store(false)
		resume, err := idemhttp.Resumer(rr.h, rr.opts...)
		if err != nil {
			t.Fatal(err)
		}
		funcs := idemkit.Funcs{"place-order": resume}
		pass, err := completer.Resume(t.Context(), rr.e, rr.s, funcs, completer.WithOlderThan(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(pass.Outcomes) != 1 || !pass.Outcomes[0].Resumed || pass.Outcomes[0].Err != nil {
			t.Fatalf("outcomes %+v, want one resumed", pass.Outcomes)
		}
		if rr.reserved.Load() != 1 || rr.charged.Load() != 1 {
			t.Fatalf("reserve ran %d times, charge %d; want once each", rr.reserved.Load(), rr.charged.Load())
		}
		if rr.sawAuth.Load() || rr.sawCookie.Load() {
			t.Fatal("the resumed request carried a credential: it was stored")
		}

		retry := httptest.NewRecorder()
		rr.mw.ServeHTTP(retry, resumeRequest())
		if retry.Code != http.StatusCreated || retry.Header().Get(idemhttp.ReplayedHeader) != "true" {
			t.Fatalf("the client's retry got %d (replayed %q): %s", retry.Code, retry.Header().Get(idemhttp.ReplayedHeader), retry.Body)
		}
		got := retry.Body.String()
		parts := strings.Fields(got)
		if len(parts) != 5 || parts[0] != "alice" || parts[1] != `{"qty":2}` || parts[3] != "POST?sku=pen" || parts[4] != "application/json" {
			t.Fatalf("the resumed handler answered %q; want the stored user, body, target and Content-Type", got)
		}
		if parts[2] == "" {
			t.Fatal("the resumed run saw no derived step key")
		}
		if rr.reserved.Load() != 1 || rr.charged.Load() != 1 {
			t.Fatalf("after the retry: reserve ran %d times, charge %d", rr.reserved.Load(), rr.charged.Load())
		}
		close(rr.hang)
		<-done
	})
}

// A request that would be over idemkit.MaxInputLen once stored is refused
// with 413 before anything is claimed; its retry with a smaller request
// runs.
func TestResumeRefusesARequestTooLargeToStore(t *testing.T) {
	rr := newResumeRoute(t)
	r := resumeRequest()
	r.Header.Set(userHeader, strings.Repeat("u", idemkit.MaxInputLen))
	w := httptest.NewRecorder()
	rr.mw.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge || rr.reserved.Load() != 0 {
		t.Fatalf("got %d with reserve run %d times; want 413 and no run", w.Code, rr.reserved.Load())
	}
	w = httptest.NewRecorder()
	rr.mw.ServeHTTP(w, resumeRequest())
	if w.Code != http.StatusCreated {
		t.Fatalf("the retry got %d: %s", w.Code, w.Body)
	}
}

// Resumer refuses an input that WithResume did not store, and a handler
// answer the route does not store is an error (the operation is then
// released, as the middleware releases it).
func TestResumerErrors(t *testing.T) {
	rr := newResumeRoute(t)
	resume, err := idemhttp.Resumer(rr.h, rr.opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{nil, []byte("x"), {1}, {1, 4, 'P', 'O'}, {1, 4, 'P', 'O', 'S', 'T', 1, '/', 1, 'A'}} {
		if _, err := resume(t.Context(), in); !errors.Is(err, idemhttp.ErrNotResumable) {
			t.Errorf("input %q: %v, want ErrNotResumable", in, err)
		}
	}
	failing, err := idemhttp.Resumer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}), rr.opts...)
	if err != nil {
		t.Fatal(err)
	}
	in := []byte{1, 4, 'P', 'O', 'S', 'T', 1, '/', 0}
	if _, err := failing(t.Context(), in); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a 503 on resume: %v, want an error naming it", err)
	}
	if _, err := idemhttp.Resumer(nil, rr.opts...); !errors.Is(err, idemkit.ErrInvalid) {
		t.Errorf("nil handler: %v", err)
	}
	if _, err := idemhttp.Resumer(rr.h, byUser); !errors.Is(err, idemkit.ErrInvalid) || !strings.Contains(err.Error(), "WithResume") {
		t.Errorf("no WithResume: %v", err)
	}
}
