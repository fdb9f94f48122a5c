package idemgin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgin"
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
	guard, err := idemgin.Idempotency(engine, idemgin.WithPrincipal(idemgin.ContextPrincipal("user")))
	if err != nil {
		panic(err)
	}
	auth := func(c *gin.Context) { c.Set("user", c.GetHeader("X-User-Id")) } // stands for real authentication
	orders := 0
	r := gin.New()
	r.POST("/orders", auth, guard, func(c *gin.Context) {
		orders++
		c.JSON(http.StatusCreated, gin.H{"id": orders})
	})

	for range 2 {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"sku":"book-42"}`))
		req.Header.Set("X-User-Id", "alice")
		req.Header.Set("Idempotency-Key", "order-1")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Printf("%d %s replayed=%q\n", w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
	}
	fmt.Println("orders created:", orders)
	// Output:
	// 201 {"id":1} replayed=""
	// 201 {"id":1} replayed="true"
	// orders created: 1
}
