package redisstore_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest/fencetest"
)

// exampleAddr is the address of the server the examples use, started by
// TestMain. In real code it is your Redis, e.g. "localhost:6379".
var exampleAddr string

// helperEnv names the environment variable that makes the test binary a
// child of the cross-process race test; see TestHelperProcess.
const helperEnv = "REDISSTORE_TEST_HELPER"

func TestMain(m *testing.M) {
	fencetest.Child(store.Open) // a child of RunProcess: it exits here
	if os.Getenv(helperEnv) != "" {
		// A child of the cross-process test: it brings its own address.
		os.Exit(m.Run())
	}
	s, stop, err := redistest.StartMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleAddr = s.Addr()
	code := m.Run()
	stop()
	os.Exit(code)
}

// prefixes numbers the key namespaces handed out by freshPrefix.
var prefixes atomic.Int64

// freshPrefix returns a key prefix no other store in this process uses,
// so tests sharing a server do not see each other's keys.
func freshPrefix() string {
	return fmt.Sprintf("t%d:", prefixes.Add(1))
}

// newStore returns a Store over client in a fresh namespace, plus opts.
func newStore(t testing.TB, client redisstore.Client, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(client, append([]redisstore.Option{redisstore.WithPrefix(freshPrefix())}, opts...)...)
	require.NoError(t, err)
	return s
}
