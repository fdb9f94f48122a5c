package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// runBriefly runs the proxy with args until it returns or 10s pass (it then
// served: run returns nil once ctx ends).
func runBriefly(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var stderr syncBuffer
	err := run(ctx, append([]string{"-listen", "127.0.0.1:0", "-upstream", "http://127.0.0.1:1"}, args...), noEnv, &stderr, nil)
	return stderr.String(), err
}

// The rule for a store that does not answer at start, the same in
// idemdemo: the proxy refuses to start, naming the store's error, whatever
// the store (SQL stores fail in store.Open, Redis at the start-up ping)
// (issue 28, item 7b).
func TestUnreachableStoreRefusedAtStart(t *testing.T) {
	for _, rawURL := range []string{
		"redis://127.0.0.1:1/0",
		"postgres://postgres@127.0.0.1:1/x?sslmode=disable",
		"mysql://root@127.0.0.1:1/x",
	} {
		logs, err := runBriefly(t, "-store", rawURL)
		if err == nil || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: run = %v, want an error wrapping store.ErrUnavailable", rawURL, err)
		}
		if strings.Contains(logs, "idemproxy listening") {
			t.Errorf("%s: the proxy listened: %s", rawURL, logs)
		}
	}
}

// A SQL URL without create_table=true on a database without the table
// stops the proxy at start with an error naming the table and the remedy
// (issue 28, item 7a).
func TestMissingSQLTableRefusedAtStart(t *testing.T) {
	rawURL := strings.Replace(postgresStore(t), "create_table=true", "", 1)
	logs, err := runBriefly(t, "-store", rawURL)
	if err == nil {
		t.Fatalf("the proxy started over a database without its table: %s", logs)
	}
	for _, want := range []string{sqlstore.DefaultTable + " does not exist", "create_table=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// With the in-process memory store (the default store) the proxy says so
// at Warn: its records are lost on restart and not shared with another
// instance (issue 28, item 7b).
func TestMemoryStoreWarned(t *testing.T) {
	var logs syncBuffer
	st, err := openStores(t.Context(), "mem://", time.Second, false, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "in-process memory") {
		t.Errorf("no warning of the memory store: %q", logs.String())
	}
}
