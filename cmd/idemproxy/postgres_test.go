package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"
)

// postgresAdmin is the administrative URL of the test PostgreSQL server;
// IDEMKIT_TEST_POSTGRES_DSN overrides it, as for the sqlstore tests.
func postgresAdmin() string {
	if v := os.Getenv("IDEMKIT_TEST_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// postgresStore creates a uniquely named database, dropped when the test
// ends, and returns its store URL with the table created on open.
func postgresStore(t *testing.T) string {
	t.Helper()
	admin := postgresAdmin()
	adb, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "idemproxy_test_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		adb.Close()
		t.Fatalf("PostgreSQL at %s: %v (./scripts/test.sh starts it; or set IDEMKIT_TEST_POSTGRES_DSN)", admin, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adb.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
		adb.Close()
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	q := u.Query()
	q.Set("create_table", "true")
	u.RawQuery = q.Encode()
	return u.String()
}

// TestTwoProxiesOverOnePostgres: the storm of TestTwoProxiesOverOneRedis...
// with the proxies sharing a PostgreSQL table instead.
func TestTwoProxiesOverOnePostgres(t *testing.T) {
	backend, executions := pythonBackend(t)
	storeURL := postgresStore(t)
	a, _ := startProxy(t, parseConfig(t, integrationConfig, backend, storeURL))
	b, _ := startProxy(t, parseConfig(t, integrationConfig, backend, storeURL))
	storm(t, []string{a.URL, b.URL}, executions, "pg")
	res, body := send(t, a.URL+"/healthz", "GET", "", "", "")
	wantStatus(t, res, body, http.StatusOK)
}
