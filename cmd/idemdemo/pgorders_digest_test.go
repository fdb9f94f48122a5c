package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The orders table keeps a digest of the idempotency key or token, never
// the raw value, which a client may have made a secret of (issue 28, item
// 7d). A retry still finds the order through the digest.
func TestPostgresOrdersStoreKeyDigest(t *testing.T) {
	svc, db := startPgService(t, nil)
	client := &http.Client{Timeout: 20 * time.Second}
	const rawKey = "raw-key-7d-5f1e"
	for range 2 {
		r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", rawKey)
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.status, "%s", r.body)
	}
	tok := issueTokenHTTP(t, client, svc.url, "alice")
	r := doHTTP(t, client, http.MethodPost, svc.url+"/orders/form", "alice", book, "Idempotency-Token", tok)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)

	rows, err := db.QueryContext(t.Context(), "SELECT dedup_key FROM "+ordersTable+" WHERE dedup_key IS NOT NULL")
	require.NoError(t, err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		n++
		assert.NotContains(t, k, rawKey, "the raw idempotency key is in the orders table")
		assert.NotContains(t, k, tok, "the raw token is in the orders table")
		assert.False(t, strings.Contains(k, ":"+rawKey), k)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 2, n, "one order per key and one per token")
}

// issueTokenHTTP issues a token for user over HTTP.
func issueTokenHTTP(t *testing.T, client *http.Client, baseURL, user string) string {
	t.Helper()
	r := doHTTP(t, client, http.MethodPost, baseURL+"/tokens", user, "")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	_, rest, ok := strings.Cut(string(r.body), `"token":"`)
	require.True(t, ok, "%s", r.body)
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}
