package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// TestKilledConnectionIsUnavailable kills, from another session, the
// server connection a View's transaction runs on, then claims through the
// View: the error must wrap store.ErrUnavailable (the store could not
// answer), whatever each driver calls a connection that died under it
// (go-sql-driver: "invalid connection"; pgx: an unexpected EOF or a
// terminated backend).
func TestKilledConnectionIsUnavailable(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := newStore(t, b)
			conn, err := b.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var id int64
			idQuery, kill := "SELECT pg_backend_pid()", "SELECT pg_terminate_backend($1)"
			alive := "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"
			if b == my {
				idQuery, kill = "SELECT CONNECTION_ID()", "KILL ?"
				alive = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
			}
			if err := tx.QueryRowContext(ctx, idQuery).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if _, err := b.db.ExecContext(ctx, kill, id); err != nil {
				t.Fatal(err)
			}
			// Wait (at most 10 s) until the server has let the session go.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				var n int
				if err := b.db.QueryRowContext(ctx, alive, id).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("session %d still alive 10 s after it was killed", id)
				}
			}
			_, _, err = s.Tx(tx).SetNX(ctx, "k", []byte("v"), time.Minute)
			if err == nil {
				t.Fatal("SetNX on a killed connection succeeded")
			}
			if !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("SetNX on a killed connection = %v, want an error wrapping store.ErrUnavailable", err)
			}
		})
	}
}
