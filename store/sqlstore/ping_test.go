package sqlstore_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestPingMissingTable: a store whose table does not exist answers Ping
// with an error wrapping store.ErrUnavailable that names the table and the
// create_table=true remedy, so that a readiness probe fails instead of
// answering ok while every operation fails; once the table exists Ping
// answers nil. Both through New and through store.Open without
// create_table.
func TestPingMissingTable(t *testing.T) {
	pgURL, err := url.Parse(pg.dsn)
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]*url.URL{"postgres": pgURL, "mysql": mysqlURL(t)}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			table := fmt.Sprintf("absent_%s", strings.ToLower(randHex(3)))
			s, err := sqlstore.New(b.db, b.dialect, sqlstore.WithTable(table), sqlstore.WithoutSweeper())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			checkMissing(t, s.Ping(t.Context()), table)

			u := *urls[b.name]
			q := u.Query()
			q.Set("table", table)
			u.RawQuery = q.Encode()
			opened, err := store.Open(t.Context(), u.String())
			if err != nil {
				t.Fatalf("store.Open without create_table: %v", err)
			}
			defer opened.(store.Closer).Close()
			checkMissing(t, opened.(store.Pinger).Ping(t.Context()), table)

			if err := s.CreateTable(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.db.Exec("DROP TABLE IF EXISTS " + table) })
			if err := s.Ping(t.Context()); err != nil {
				t.Errorf("Ping with the table = %v, want nil", err)
			}
			if err := opened.(store.Pinger).Ping(t.Context()); err != nil {
				t.Errorf("Ping of the opened store with the table = %v, want nil", err)
			}
		})
	}
}

func checkMissing(t *testing.T, err error, table string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Ping without table %s = nil, want an error naming it", table)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping error %v does not wrap store.ErrUnavailable", err)
	}
	for _, want := range []string{table, "create_table=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Ping error %q does not say %q", err, want)
		}
	}
}
