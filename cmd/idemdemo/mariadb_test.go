package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mariaTestDatabase creates a database of its own on the MariaDB at
// 127.0.0.1:3306 (root, no password; ./scripts/test.sh starts it),
// dropped when t ends, and returns its mysql:// store URL.
func mariaTestDatabase(t *testing.T) string {
	t.Helper()
	adb, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/")
	require.NoError(t, err)
	t.Cleanup(func() { _ = adb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, adb.PingContext(ctx), "MariaDB at 127.0.0.1:3306 (./scripts/test.sh starts it)")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "idemdemo_my_" + hex.EncodeToString(b)
	_, err = adb.ExecContext(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := adb.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
		assert.NoError(t, err)
	})
	return "mysql://root@127.0.0.1:3306/" + name + "?create_table=true"
}
