package idemfiber_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfiber"
	"github.com/idemkit/idemkit/store/memstore"
)

func ExampleNew() {
	st, err := memstore.New()
	if err != nil {
		panic(err)
	}
	engine, err := idemkit.New(st, idemkit.WithObserver(nil))
	if err != nil {
		panic(err)
	}
	guard, err := idemfiber.New(engine,
		idemfiber.WithPrincipal(idemfiber.TrustedHeaderPrincipal("X-User-Id")))
	if err != nil {
		panic(err)
	}
	orders := 0
	app := fiber.New()
	app.Post("/orders", guard, func(c fiber.Ctx) error {
		orders++
		return c.Status(201).SendString(fmt.Sprintf(`{"id":%d}`, orders))
	})

	for range 2 {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"sku":"book-42"}`))
		req.Header.Set("X-User-Id", "alice")
		req.Header.Set("Idempotency-Key", "order-1")
		resp, err := app.Test(req)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d replayed=%q\n", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	fmt.Println("orders created:", orders)
	// Output:
	// 201 replayed=""
	// 201 replayed="true"
	// orders created: 1
}
