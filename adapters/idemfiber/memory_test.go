package idemfiber_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gofiber/fiber/v3"

	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestPrincipalInRequestMemory: a principal function may return a string
// over fasthttp's request memory (c.Get, without Fiber's Immutable), which
// fasthttp rewrites for the connection's next request. The engine keeps
// the scope of a call (its scope cache), so a kept alias would change to
// a later request's principal and, when that principal shares the cache
// slot, answer it with the first principal's keys: here, every principal
// sends the same key and body one after another on one connection, and
// each must run the handler itself, never get another's answer. The key
// is UUID-sized: the engine then resumes the key digest from the cached
// scope's hash state rather than rehashing the scope.
func TestPrincipalInRequestMemory(t *testing.T) {
	guard, err := idemfiber.New(testkit.NewEngine(t), idemfiber.WithPrincipal(func(c fiber.Ctx) (string, error) {
		return c.Get(userHeader), nil // valid only within the handler
	}))
	if err != nil {
		t.Fatal(err)
	}
	o := &orders{}
	app := fiber.New()
	app.Post("/orders/:id", guard, o.handle)
	u := listen(t, app) + "/orders/1"
	const key = "3f0c2b1e-8d4a-4f6e-9b7c-2a1d5e8f0c3b"
	for i := range 600 { // more principals than the scope cache's 256 slots
		a := send(t, "POST", u, body, as(fmt.Sprintf("user-%05d", i), key)...)
		if a.status != http.StatusCreated || a.header.Get(idemfiber.ReplayedHeader) != "" {
			t.Fatalf("principal %d, first use of its key: %v, after %d runs", i, a, o.runs.Load())
		}
	}
}

// TestConcurrentRequestsKeepTheirOwn: 32 requests at once, each with its
// own key and body, over a real listener (run with -race): each gets a
// response made from its own body, and a retry of each replays that
// response, so no request's body, key or response is read from memory
// fasthttp has handed to another request.
func TestConcurrentRequestsKeepTheirOwn(t *testing.T) {
	guard, err := idemfiber.New(testkit.NewEngine(t), idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader)),
		idemfiber.WithReplayHeaders("X-Key"))
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New()
	app.Post("/echo", guard, func(c fiber.Ctx) error {
		c.Set("X-Key", c.Get(idemfiber.DefaultKeyHeader))
		c.Set("Content-Type", "application/json")
		return c.Status(http.StatusCreated).Send(c.Body())
	})
	u := listen(t, app) + "/echo"
	const n = 32
	req := func(i int) (key, payload string) {
		return fmt.Sprintf("key-%02d-%s", i, strings.Repeat("k", i)),
			fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 40*i))
	}
	for round, wantReplayed := range []string{"", "true"} {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				key, payload := req(i)
				a, err := trySend("POST", u, payload, as(fmt.Sprintf("user-%02d", i%4), key)...)
				switch {
				case err != nil:
					t.Errorf("round %d request %d: %v", round, i, err)
				case a.status != http.StatusCreated || a.body != payload || a.header.Get("X-Key") != key ||
					a.header.Get(idemfiber.ReplayedHeader) != wantReplayed:
					t.Errorf("round %d request %d: %v, want 201 %s with X-Key %s, replayed %q", round, i, a, payload, key, wantReplayed)
				}
			})
		}
		wg.Wait()
	}
}
