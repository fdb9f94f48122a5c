package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestServerStatementTimeout runs a CompareAndSwap on a row another
// transaction holds, over sessions whose server cancels a statement after
// 200ms (statement_timeout on PostgreSQL, max_statement_time on MariaDB),
// with a client deadline far longer: the server's cancellation must wrap
// store.ErrUnavailable like a client deadline does, and nothing changed.
func TestServerStatementTimeout(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			table := freshTable(t, b)
			s, err := sqlstore.New(b.db, b.dialect, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			var dsn string
			if b == pg {
				u, err := url.Parse(b.dsn)
				if err != nil {
					t.Fatal(err)
				}
				q := u.Query()
				q.Set("statement_timeout", "200")
				u.RawQuery = q.Encode()
				dsn = u.String()
			} else {
				cfg, err := mysql.ParseDSN(b.dsn)
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Params == nil {
					cfg.Params = map[string]string{}
				}
				cfg.Params["max_statement_time"] = "0.2"
				dsn = cfg.FormatDSN()
			}
			db, err := sql.Open(b.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			timed, err := sqlstore.New(db, b.dialect, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = timed.Close() })

			mustSet(t, s, secretKey, []byte("v"), time.Minute)
			tx, err := b.db.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if ok, err := s.Tx(tx).CompareAndSwap(t.Context(), secretKey, []byte("v"), []byte("tx"), time.Minute); err != nil || !ok {
				t.Fatalf("CompareAndSwap in the transaction = %v, %v", ok, err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err = timed.CompareAndSwap(ctx, secretKey, []byte("v"), []byte("w"), time.Minute)
			checkUnavailable(t, err)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v: the client's deadline passed, want the server's timeout", err)
			}
			_ = tx.Rollback()
			mustHold(t, s, secretKey, []byte("v"))
		})
	}
}
