package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// The statements a migration tool runs to create the table.
func ExampleSchema() {
	stmts, err := sqlstore.Schema(sqlstore.Postgres, "idem")
	if err != nil {
		log.Fatal(err)
	}
	for _, st := range stmts {
		fmt.Println(strings.Fields(st)[:6]) // the statement's first words
	}
	// Output:
	// [CREATE TABLE IF NOT EXISTS "idem"]
	// [CREATE INDEX IF NOT EXISTS "idem_expires_at"]
}

// A Store over PostgreSQL through pgx's database/sql driver (imported by
// the program: import _ "github.com/jackc/pgx/v5/stdlib").
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithTable("idem"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTable(ctx); err != nil {
		log.Fatal(err)
	}
	set, existing, err := s.SetNX(ctx, "order:42", []byte("claim"), time.Minute)
	fmt.Println(set, existing, err)
}

// Completing a claim inside the business transaction: the record and the
// order commit together, or neither does.
func ExampleStore_Tx() {
	ctx := context.Background()
	db, _ := sql.Open("pgx", "postgres://app@localhost:5432/app")
	s, _ := sqlstore.New(db, sqlstore.Postgres)
	claim, done := []byte("claim:owner-7"), []byte("done:owner-7")

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (user_id, idem_key) VALUES ($1, $2)", 7, "order:42"); err != nil {
		log.Fatal(err)
	}
	ok, err := s.Tx(tx).CompareAndSwap(ctx, "order:42", claim, done, 24*time.Hour)
	if err != nil || !ok {
		log.Fatal("lease lost: the order rolls back") // a stale owner commits nothing
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}

// Opening a store from a URL; the program imports the driver.
func Example_uRL() {
	s, err := store.Open(context.Background(), "mysql://app:secret@localhost:3306/app?table=idem&create_table=true")
	if err != nil {
		log.Fatal(err) // never shows the password
	}
	defer s.(store.Closer).Close()
}
