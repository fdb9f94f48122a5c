package idemecho_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v5"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemecho"
	"github.com/idemkit/idemkit/store/memstore"
)

func ExampleIdempotency() {
	st, err := memstore.New()
	if err != nil {
		panic(err)
	}
	engine, err := idemkit.New(st, idemkit.WithObserver(nil))
	if err != nil {
		panic(err)
	}
	guard, err := idemecho.Idempotency(engine, idemecho.WithPrincipal(idemecho.ContextPrincipal("user")))
	if err != nil {
		panic(err)
	}
	auth := func(next echo.HandlerFunc) echo.HandlerFunc { // stands for real authentication
		return func(c *echo.Context) error {
			c.Set("user", c.Request().Header.Get("X-User-Id"))
			return next(c)
		}
	}
	orders := 0
	e := echo.New()
	e.POST("/orders", func(c *echo.Context) error {
		orders++
		return c.JSON(http.StatusCreated, map[string]int{"id": orders})
	}, auth, guard)

	for range 2 {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"sku":"book-42"}`))
		req.Header.Set("X-User-Id", "alice")
		req.Header.Set("Idempotency-Key", "order-1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Printf("%d %s replayed=%q\n", w.Code, strings.TrimSpace(w.Body.String()), w.Header().Get("Idempotent-Replayed"))
	}
	fmt.Println("orders created:", orders)
	// Output:
	// 201 {"id":1} replayed=""
	// 201 {"id":1} replayed="true"
	// orders created: 1
}
