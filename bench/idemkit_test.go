package bench

import (
	"testing"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// startIdemkit serves o behind idemhttp's Idempotency-Key middleware on a
// loopback net/http server and returns its base URL. The instance has its own
// Redis client, store and engine (with a near cache in front when near is
// set); extra adds middleware options (WithWait).
func startIdemkit(tb testing.TB, o *orders, near bool, extra ...idemhttp.Option) string {
	tb.Helper()
	opts := append([]idemhttp.Option{
		idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal(userHeader)),
	}, extra...)
	mw, err := idemhttp.Idempotency(newEngine(tb, near), opts...)
	if err != nil {
		tb.Fatalf("idemhttp.Idempotency: %v", err)
	}
	return startNetHTTP(tb, routeOrders(mw(orderHandler(o))))
}
