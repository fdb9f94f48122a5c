package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// A SQL store URL without create_table=true, on a database without the
// table, stops the demo at start with an error naming the table and the
// create_table=true remedy, instead of it answering GET /healthz 200 while
// every order gets 500 (issue 28, item 7a).
func TestMissingSQLTableRefusedAtStart(t *testing.T) {
	for name, rawURL := range map[string]string{
		"postgres": sqlTestURL(t, "pgx", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/%s?sslmode=disable"),
		"mariadb":  sqlTestURL(t, "mysql", "root@tcp(127.0.0.1:3306)/", "mysql://root@127.0.0.1:3306/%s"),
	} {
		t.Run(name, func(t *testing.T) {
			if rawURL == "" {
				t.Skipf("%s does not answer (./scripts/test.sh starts it)", name)
			}
			var stdout, stderr syncBuffer
			// run returns nil once ctx ends if the demo started.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := run(ctx, []string{"-addr", "127.0.0.1:0", "-store", rawURL}, &stdout, &stderr)
			require.Error(t, err, "the demo started over a database without its table")
			assert.Contains(t, err.Error(), sqlstore.DefaultTable+" does not exist")
			assert.Contains(t, err.Error(), "create_table=true")
			assert.NotContains(t, stdout.String(), "listening")
			assert.Equal(t, 1, exitCode(err, &syncBuffer{}))
		})
	}
}

// The rule for a store that does not answer at start, the same in
// idemproxy: the program refuses to start, naming the store's error,
// whatever the store (SQL stores fail in store.Open, Redis at the
// start-up ping), with or without a fallback (issue 28, item 7b).
func TestUnreachableStoreRefusedAtStart(t *testing.T) {
	for _, args := range [][]string{
		{"-store", "redis://127.0.0.1:1"},
		{"-store", "redis://127.0.0.1:1", "-fallback", "mem://"},
		{"-store", "postgres://postgres@127.0.0.1:1/x?sslmode=disable"},
		{"-store", "mysql://root@127.0.0.1:1/x"},
	} {
		var stdout, stderr syncBuffer
		// run returns nil once ctx ends if the demo started.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), &stdout, &stderr)
		cancel()
		require.Error(t, err, "%v: the demo started", args)
		assert.ErrorIs(t, err, store.ErrUnavailable, args)
		assert.NotContains(t, stdout.String(), "listening", args)
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
