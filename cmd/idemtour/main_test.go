package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/setup"
)

func TestTour(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, setup.Config{Store: "mem://"}))
	got := out.String()
	assert.Contains(t, got, "admitted 1, rejected 9 as duplicates")
	assert.Contains(t, got, "user-1: receipt #1001 (replayed=false)")
	assert.Contains(t, got, "user-1: receipt #1001 (replayed=true)")
	assert.Contains(t, got, "user-2: refused")
	assert.Contains(t, got, `attempt 3: {"charge":"ch_1","amount":1200} (replayed=true)`)
	assert.Contains(t, got, "the card was charged 1 time(s)")
}

func TestHelpDoesNotRunTheTour(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 0, cli(context.Background(), args, &out, &errOut), args)
		assert.Empty(t, out.String(), "help must not run the tour")
		assert.Contains(t, errOut.String(), "Usage: idemtour")
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, cli(context.Background(), []string{"-x"}, &out, &errOut))
	assert.Equal(t, 2, cli(context.Background(), []string{"extra"}, &out, &errOut))
	assert.Empty(t, out.String())
	assert.Equal(t, 0, cli(context.Background(), nil, &out, &errOut))
	assert.Contains(t, out.String(), "the card was charged 1 time(s)")
}

func TestTourOnEveryStoreByURL(t *testing.T) {
	srv := redistest.Start(t)
	for _, rawURL := range []string{"mem://", "bolt://" + filepath.Join(t.TempDir(), "tour.db"), "redis://" + srv.Addr() + "/1"} {
		for range 2 { // a second run over the same store does not meet the first
			var out, errOut bytes.Buffer
			require.Equal(t, 0, cli(context.Background(), []string{"-store", rawURL}, &out, &errOut), "%s: %s", rawURL, &errOut)
			assert.Contains(t, out.String(), "the card was charged 1 time(s)", rawURL)
			assert.Contains(t, out.String(), "admitted 1, rejected 9 as duplicates", rawURL)
		}
	}
}

func TestTourRefusesABadStoreURL(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, cli(context.Background(), []string{"-store", "redis://:s3cr3t@localhost:notaport"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "invalid port")
	assert.NotContains(t, errOut.String(), "s3cr3t")
	assert.Empty(t, out.String())
	t.Setenv("IDEMKIT_STORE", "nosuch://x")
	errOut.Reset()
	assert.Equal(t, 1, cli(context.Background(), nil, &out, &errOut))
	assert.Contains(t, errOut.String(), `"nosuch"`)
}
