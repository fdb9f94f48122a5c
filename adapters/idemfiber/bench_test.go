package idemfiber_test

import (
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"

	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/internal/testkit"
)

// BenchmarkReplay serves a replay through a Fiber app's handler in
// process (no network), over a memstore, so the figures are the
// middleware's, the engine's and Fiber's own: compare with
// BenchmarkNoMiddleware.
func BenchmarkReplay(b *testing.B) {
	guard, err := idemfiber.New(testkit.NewEngine(b), idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal(userHeader)))
	if err != nil {
		b.Fatal(err)
	}
	o := &orders{}
	app := fiber.New()
	app.Post("/orders/:id", guard, o.handle)
	benchHandler(b, app)
	if o.runs.Load() != 1 {
		b.Fatalf("handler ran %d times, want 1", o.runs.Load())
	}
}

// BenchmarkNoMiddleware is the same request to the bare handler.
func BenchmarkNoMiddleware(b *testing.B) {
	o := &orders{}
	app := fiber.New()
	app.Post("/orders/:id", o.handle)
	benchHandler(b, app)
}

func benchHandler(b *testing.B, app *fiber.App) {
	h := app.Handler()
	var ctx fasthttp.RequestCtx
	serve := func() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/orders/1")
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.Header.Set(userHeader, "alice")
		ctx.Request.Header.Set(idemfiber.DefaultKeyHeader, "0a1b2c3d-0000-4000-8000-000000000001")
		ctx.Request.SetBodyString(body)
		h(&ctx)
		if ctx.Response.StatusCode() != 201 {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
	serve()
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}
