package bench

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

// startNetHTTP serves h on a net/http server on a loopback port and returns
// its base URL. The server is shut down at the end of the test.
func startNetHTTP(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln := listen(tb)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("net/http server: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// orderHandler is orders.create as a net/http handler.
func orderHandler(o *orders) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil { // a real handler reads the order
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, body := o.create()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", location(id))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
}

// routeOrders mounts h on POST /orders, as a service would.
func routeOrders(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST "+orderPath, h)
	return mux
}
