package main

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// startLogged starts the demo over rawURL with its log in logs.
func startLogged(t *testing.T, rawURL string, logs *syncBuffer) *service {
	t.Helper()
	cfg := defaultConfig()
	cfg.addr = "127.0.0.1:0"
	cfg.stack.Store = rawURL
	svc, err := start(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.shutdown(time.Second) })
	return svc
}

// A SQL store URL without create_table=true, on a database without the
// table, makes the demo unready: the start-up warning and GET /healthz's
// log say the table is missing and how to create it, and /healthz answers
// 503, instead of 200 while every order gets 500 (issue 28, item 7a).
func TestMissingSQLTableIsUnready(t *testing.T) {
	for name, rawURL := range map[string]string{
		"postgres": sqlTestURL(t, "pgx", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/%s?sslmode=disable"),
		"mariadb":  sqlTestURL(t, "mysql", "root@tcp(127.0.0.1:3306)/", "mysql://root@127.0.0.1:3306/%s"),
	} {
		t.Run(name, func(t *testing.T) {
			if rawURL == "" {
				t.Skipf("%s does not answer (./scripts/test.sh starts it)", name)
			}
			var logs syncBuffer
			svc := startLogged(t, rawURL, &logs)
			assert.Contains(t, logs.String(), "level=WARN")
			assert.Contains(t, logs.String(), sqlstore.DefaultTable+" does not exist")
			assert.Contains(t, logs.String(), "create_table=true")
			c := &http.Client{Timeout: 10 * time.Second}
			r := doHTTP(t, c, http.MethodGet, svc.url+"/healthz", "", "")
			assert.Equal(t, http.StatusServiceUnavailable, r.status, "GET /healthz: %s", r.body)
		})
	}
}

// The rule for a store that does not answer at start, the same in
// idemproxy: the demo starts, warns naming the store's error, and reports
// unready until the store answers; a SQL store, whose store.Open connects,
// stops it at start (issue 28, item 7b).
func TestUnreachableStoreAtStart(t *testing.T) {
	var logs syncBuffer
	svc := startLogged(t, "redis://127.0.0.1:1", &logs)
	assert.Contains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), "the store does not answer")
	c := &http.Client{Timeout: 10 * time.Second}
	assert.Equal(t, http.StatusServiceUnavailable, doHTTP(t, c, http.MethodGet, svc.url+"/healthz", "", "").status)

	for _, rawURL := range []string{"postgres://postgres@127.0.0.1:1/x?sslmode=disable", "mysql://root@127.0.0.1:1/x"} {
		var stdout, stderr syncBuffer
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // run returns nil at its end if the demo started
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-store", rawURL}, &stdout, &stderr)
		cancel()
		require.Error(t, err, "%s: the demo started", rawURL)
		assert.ErrorIs(t, err, store.ErrUnavailable, rawURL)
		assert.NotContains(t, stdout.String(), "listening", rawURL)
	}
}

// Once started, a store that stops answering makes GET /healthz 503.
func TestHealthzUnreadyWhenTheTableGoes(t *testing.T) {
	svc, db := startPgService(t, nil)
	c := &http.Client{Timeout: 10 * time.Second}
	require.Equal(t, http.StatusOK, doHTTP(t, c, http.MethodGet, svc.url+"/healthz", "", "").status)
	_, err := db.ExecContext(t.Context(), "DROP TABLE "+sqlstore.DefaultTable)
	require.NoError(t, err)
	r := doHTTP(t, c, http.MethodGet, svc.url+"/healthz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, r.status, "GET /healthz: %s", r.body)
}
