package bench

import (
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/policy/nearcache"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// startIdemkitFiber serves o on a Fiber app behind idemfiber's middleware
// over redisstore (with a near cache in front when near is set) and
// returns its base URL. The instance has its own Redis client, store and
// engine; extra adds middleware options.
func startIdemkitFiber(tb testing.TB, o *orders, near bool, extra ...idemfiber.Option) string {
	tb.Helper()
	opts := append([]idemfiber.Option{
		idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader)),
	}, extra...)
	guard, err := idemfiber.New(newEngine(tb, near), opts...)
	if err != nil {
		tb.Fatalf("idemfiber.New: %v", err)
	}
	app := fiber.New()
	app.Post(orderPath, guard, fiberHandler(o))
	return serveFiber(tb, app)
}

// newEngine returns an engine over a redisstore on a client of its own,
// behind a near cache of settled records when near is set.
func newEngine(tb testing.TB, near bool) *idemkit.Engine {
	tb.Helper()
	rs, err := redisstore.New(newRedisClient(tb))
	if err != nil {
		tb.Fatalf("redisstore.New: %v", err)
	}
	var st store.Store = rs
	if near {
		if st, err = nearcache.New(rs, idemkit.Settled); err != nil {
			tb.Fatalf("nearcache.New: %v", err)
		}
	}
	eng, err := idemkit.New(st, idemkit.WithObserver(nil), idemkit.WithRetention(recordTTL))
	if err != nil {
		tb.Fatalf("idemkit.New: %v", err)
	}
	return eng
}
