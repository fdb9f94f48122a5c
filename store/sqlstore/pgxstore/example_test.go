package pgxstore_test

import (
	"context"
	"database/sql"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/idemkit/idemkit/store/sqlstore"
	"github.com/idemkit/idemkit/store/sqlstore/pgxstore"
)

// Completing a claim inside a pgx transaction: the record and the order
// commit together, or neither does. The Store (sweeper, CreateTable) runs
// over database/sql; the View runs on the pgx.Tx.
func ExampleView() {
	ctx := context.Background()
	const dsn = "postgres://app@localhost:5432/app"
	db, _ := sql.Open("pgx", dsn)
	s, err := sqlstore.New(db, sqlstore.Postgres)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders (user_id, idem_key) VALUES ($1, $2)", 7, "order:42"); err != nil {
		log.Fatal(err)
	}
	ok, err := pgxstore.View(s, tx).CompareAndSwap(ctx, "order:42", []byte("claim:owner-7"), []byte("done:owner-7"), 24*time.Hour)
	if err != nil || !ok {
		log.Fatal("lease lost: the order rolls back")
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
