package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// openLogged opens the stores of rawURL with their start-up log in logs.
func openLogged(t *testing.T, rawURL string, logs *syncBuffer) (*stores, error) {
	t.Helper()
	st, err := openStores(t.Context(), rawURL, time.Second, false, slog.New(slog.NewTextHandler(logs, nil)))
	if err == nil {
		t.Cleanup(func() { _ = st.Close() })
	}
	return st, err
}

// The rule for a store that does not answer at start, the same in
// idemdemo: the proxy starts, warns naming the store's error, and its
// health check fails until the store answers; a SQL store, whose
// store.Open connects, stops it at start (issue 28, item 7b).
func TestUnreachableStoreAtStart(t *testing.T) {
	var logs syncBuffer
	st, err := openLogged(t, "redis://127.0.0.1:1/0", &logs)
	if err != nil {
		t.Fatalf("an unreachable Redis stopped the proxy: %v", err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "does not answer") {
		t.Errorf("no warning of the store that does not answer: %q", logs.String())
	}
	if err := st.ping(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("health check = %v, want store.ErrUnavailable", err)
	}
	for _, rawURL := range []string{"postgres://postgres@127.0.0.1:1/x?sslmode=disable", "mysql://root@127.0.0.1:1/x"} {
		if _, err := openLogged(t, rawURL, &logs); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: openStores = %v, want store.ErrUnavailable", rawURL, err)
		}
	}
}

// A SQL URL without create_table=true on a database without the table:
// the proxy warns at start naming the table and the remedy, and its health
// check fails, naming them too (issue 28, item 7a).
func TestMissingSQLTableIsUnready(t *testing.T) {
	rawURL := strings.Replace(postgresStore(t), "create_table=true", "", 1)
	var logs syncBuffer
	st, err := openLogged(t, rawURL, &logs)
	if err != nil {
		t.Fatal(err)
	}
	err = st.ping(t.Context())
	for _, text := range []string{logs.String(), fmt.Sprint(err)} {
		for _, want := range []string{sqlstore.DefaultTable + " does not exist", "create_table=true"} {
			if !strings.Contains(text, want) {
				t.Errorf("%q does not say %q", text, want)
			}
		}
	}
}

// With the in-process memory store (the default store) the proxy says so
// at Warn: its records are lost on restart and not shared with another
// instance (issue 28, item 7b).
func TestMemoryStoreWarned(t *testing.T) {
	var logs syncBuffer
	if _, err := openLogged(t, "mem://", &logs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "in-process memory") {
		t.Errorf("no warning of the memory store: %q", logs.String())
	}
}
