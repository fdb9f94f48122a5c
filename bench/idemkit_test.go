package bench

import (
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/redisstore"
)

// startIdemkit serves o behind idemhttp's Idempotency-Key middleware on a
// loopback net/http server and returns its base URL. The instance has its own
// Redis client, store and engine; extra adds middleware options (WithWait).
func startIdemkit(tb testing.TB, o *orders, extra ...idemhttp.Option) string {
	tb.Helper()
	st, err := redisstore.New(newRedisClient(tb))
	if err != nil {
		tb.Fatalf("redisstore.New: %v", err)
	}
	eng, err := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithRetention(recordTTL))
	if err != nil {
		tb.Fatalf("idemkit.New: %v", err)
	}
	opts := append([]idemhttp.Option{
		idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal(userHeader)),
	}, extra...)
	mw, err := idemhttp.Idempotency(eng, opts...)
	if err != nil {
		tb.Fatalf("idemhttp.Idempotency: %v", err)
	}
	return startNetHTTP(tb, routeOrders(mw(orderHandler(o))))
}
