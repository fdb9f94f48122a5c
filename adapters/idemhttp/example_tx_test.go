package idemhttp_test

import (
	"database/sql"
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// A handler that places an order and records its response in the same
// database transaction: the order and the stored response commit together,
// so a crash between them cannot make a retry place the order again.
func ExampleCompleteIn() {
	var db *sql.DB // opened with a driver, e.g. github.com/jackc/pgx/v5/stdlib
	st, err := sqlstore.New(db, sqlstore.Postgres)
	if err != nil {
		panic(err)
	}
	engine, err := idemkit.New(st)
	if err != nil {
		panic(err)
	}
	guard, err := idemhttp.Idempotency(engine, idemhttp.WithPrincipal(idemhttp.TrustedHeaderPrincipal("X-User")))
	if err != nil {
		panic(err)
	}
	placeOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		defer tx.Rollback()
		var id int64
		err = tx.QueryRowContext(r.Context(),
			"INSERT INTO orders (user_id, idem_key) VALUES ($1, $2) RETURNING id",
			r.Header.Get("X-User"), r.Header.Get(idemhttp.DefaultKeyHeader)).Scan(&id)
		if err != nil {
			http.Error(w, "order not placed", http.StatusInternalServerError)
			return
		}
		body := fmt.Appendf(nil, `{"order":%d}`, id)
		h := http.Header{"Content-Type": {"application/json"}, "Location": {fmt.Sprint("/orders/", id)}}
		if err := idemhttp.CompleteIn(r, st.Tx(tx), http.StatusCreated, h, body); err != nil {
			http.Error(w, "order not placed", http.StatusConflict) // rolled back by the deferred Rollback
			return
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, "order not placed", http.StatusServiceUnavailable)
			return
		}
		// Write nothing: the middleware sends the recorded response.
	})
	http.Handle("POST /orders", guard(placeOrder))
}
