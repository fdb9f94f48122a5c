package idemhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/memstore"
)

// A worker ships order 42 inside a claim of its key; its Transport sends
// the claim's fencing token, and the warehouse refuses a token lower than
// the highest it has seen for the order: a worker whose claim was taken
// over cannot ship it again once the new owner has been there.
func ExampleFenceFromRequest() {
	var mu sync.Mutex
	highest := map[string]uint64{} // per order, the highest token seen
	warehouse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fence, ok, err := idemhttp.FenceFromRequest(r, idemhttp.FenceHeader)
		switch {
		case err != nil:
			http.Error(w, "malformed fence", http.StatusBadRequest)
			return
		case !ok:
			http.Error(w, "fence required", http.StatusPreconditionRequired)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if fence < highest[r.URL.Path] {
			http.Error(w, "stale fence", http.StatusConflict)
			return
		}
		highest[r.URL.Path] = fence
		w.WriteHeader(http.StatusNoContent)
	}))
	defer warehouse.Close()

	client := &http.Client{Transport: &idemhttp.Transport{FenceHeader: idemhttp.FenceHeader}}
	ship := func(ctx context.Context, fence string) {
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, warehouse.URL+"/orders/42/ship", nil)
		if fence != "" { // a stale worker's request, for the example
			r.Header.Set(idemhttp.FenceHeader, fence)
		}
		resp, err := client.Do(r)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}

	mem, _ := memstore.New()
	engine, _ := idemkit.New(mem, idemkit.WithObserver(nil))
	_, err := engine.Do(context.Background(), "ship-42", "", func(ctx context.Context) ([]byte, error) {
		ship(ctx, "") // carries this claim's token
		fence, _ := idemkit.FenceFromContext(ctx)
		ship(ctx, strconv.FormatUint(fence-1, 10)) // an earlier claim's token
		return nil, nil
	})
	if err != nil {
		panic(err)
	}
	ship(context.Background(), "") // outside a claim: no token
	// Output:
	// 204
	// 409
	// 428
}
