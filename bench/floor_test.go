package bench

import (
	"context"
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/redis/go-redis/v9"
)

// floorKey is the key the one-GET floor reads: a value as long as a small
// stored response, written once per run.
var floorKey = "bench:" + runID + ":floor"

// The one-GET floors: each HTTP stack's handler doing one raw Redis GET
// before it answers, with no middleware. A middleware's increment over its
// own stack's floor is what it costs beyond the one round trip that no
// idempotency layer can avoid.

// startNetHTTPFloor serves o on net/http behind one GET.
func startNetHTTPFloor(tb testing.TB, o *orders) string {
	tb.Helper()
	rdb := floorClient(tb)
	inner := orderHandler(o)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := rdb.Get(r.Context(), floorKey).Err(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusInternalServerError)
			return
		}
		inner.ServeHTTP(w, r)
	})
	return startNetHTTP(tb, routeOrders(h))
}

// startFiberFloor serves o on Fiber behind one GET.
func startFiberFloor(tb testing.TB, o *orders) string {
	tb.Helper()
	rdb := floorClient(tb)
	inner := fiberHandler(o)
	app := fiber.New()
	app.Post(orderPath, func(c fiber.Ctx) error {
		if err := rdb.Get(c, floorKey).Err(); err != nil {
			return c.Status(http.StatusInternalServerError).SendString("redis: " + err.Error())
		}
		return inner(c)
	})
	return serveFiber(tb, app)
}

// floorClient returns a counted client of its own, with floorKey written.
func floorClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := newRedisClient(tb)
	value := make([]byte, 120)
	if err := rdb.Set(context.Background(), floorKey, value, recordTTL).Err(); err != nil {
		tb.Fatalf("set floor key: %v", err)
	}
	return rdb
}
