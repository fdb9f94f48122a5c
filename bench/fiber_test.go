package bench

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/idempotency"
	fiberredis "github.com/gofiber/storage/redis/v3"
)

// startFiber serves o on a Fiber app on a loopback port and returns its base
// URL. With guarded set, the route sits behind middleware/idempotency with
// a Redis storage on a client of its own; the locker is left at Fiber's
// default, NewMemoryLock, the only Locker Fiber ships.
func startFiber(tb testing.TB, o *orders, guarded bool) string {
	tb.Helper()
	app := fiber.New()
	if guarded {
		app.Use(idempotency.New(fiberConfig(tb)))
	}
	app.Post(orderPath, fiberHandler(o))
	return serveFiber(tb, app)
}

// serveFiber serves app on a loopback port until the test ends and
// returns its base URL.
func serveFiber(tb testing.TB, app *fiber.App) string {
	tb.Helper()
	ln := listen(tb)
	done := make(chan error, 1)
	go func() { done <- app.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true}) }()
	tb.Cleanup(func() {
		_ = app.Shutdown()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// fiberConfig is the middleware configuration: the IETF header name instead
// of Fiber's X-Idempotency-Key, records kept as long as idemkit keeps them,
// and the replayed headers limited to those idemkit replays.
func fiberConfig(tb testing.TB) idempotency.Config {
	return idempotency.Config{
		KeyHeader:           keyHeader,
		Storage:             fiberredis.NewFromConnection(newRedisClient(tb)),
		Lifetime:            recordTTL,
		KeepResponseHeaders: []string{"Content-Type", "Location"},
	}
}

// fiberHandler is orders.create as a Fiber handler.
func fiberHandler(o *orders) fiber.Handler {
	return func(c fiber.Ctx) error {
		id, body := o.create()
		c.Set("Content-Type", "application/json")
		c.Set("Location", location(id))
		return c.Status(http.StatusCreated).Send(body)
	}
}
