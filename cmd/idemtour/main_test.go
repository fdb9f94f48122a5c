package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTour(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
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
