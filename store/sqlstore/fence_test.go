package sqlstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest/fencetest"
)

// TestFence races takeovers of one key on each backend, from goroutines
// and from a child process stopped past its lease (see fencetest). Both
// sides open the store from a URL naming a fresh table (TestMain wires
// fencetest.Child); a pool of at most 12 connections keeps the race well
// within the server's connection limit.
func TestFence(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			open := func(t *testing.T) (store.Store, string) {
				u := storeURL(t, b, freshTable(t, b))
				s, err := store.Open(context.Background(), u)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.(store.Closer).Close() })
				return s, u
			}
			t.Run("Race", func(t *testing.T) {
				fencetest.Run(t, func(t *testing.T) store.Store {
					s, _ := open(t)
					return s
				})
			})
			t.Run("Process", func(t *testing.T) {
				s, u := open(t)
				fencetest.RunProcess(t, s, u)
			})
		})
	}
}

// storeURL returns the store URL of table in b's database.
func storeURL(t *testing.T, b *backend, table string) string {
	q := url.Values{"table": {table}, "max_open": {"12"}}
	if b.name == "postgres" {
		u, err := url.Parse(b.dsn)
		if err != nil {
			t.Fatal(err)
		}
		v := u.Query()
		for k, vs := range q {
			v[k] = vs
		}
		u.RawQuery = v.Encode()
		return u.String()
	}
	cfg, err := mysql.ParseDSN(b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName, RawQuery: q.Encode(), User: url.User(cfg.User)}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	}
	return u.String()
}
