package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
)

var (
	errDeclined   = errors.New("card declined")
	errOutOfStock = errors.New("out of stock")
)

func TestFinalErrorsKeepTheirIdentityOnReplay(t *testing.T) {
	codec := idemkit.FinalErrors(errOutOfStock, nil, errDeclined)
	e := testkit.NewEngine(t, idemkit.WithErrorCodec(codec))
	ctx := context.Background()
	first := fmt.Errorf("charge 42: %w", errDeclined)
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, first })
	require.ErrorIs(t, err, errDeclined)
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.True(t, res.Replayed)
	require.ErrorIs(t, err, errDeclined)
	assert.NotErrorIs(t, err, errOutOfStock)
	assert.Equal(t, first.Error(), err.Error())

	// An error that matches nothing registered is not final: the key is
	// released and the next call runs.
	_, err = e.Do(ctx, "k2", "", func(context.Context) ([]byte, error) { return nil, errors.New("timeout") })
	require.Error(t, err)
	res, err = e.Do(ctx, "k2", "", func(context.Context) ([]byte, error) { return []byte("ran"), nil })
	require.NoError(t, err)
	assert.False(t, res.Replayed)
}

func TestFinalErrorsReplayWithoutRegistrationKeepsTheMessage(t *testing.T) {
	data, final := idemkit.FinalErrors(errDeclined).EncodeError(errDeclined)
	require.True(t, final)
	err := idemkit.FinalErrors(errOutOfStock).DecodeError(data)
	assert.Equal(t, errDeclined.Error(), err.Error())
	assert.NotErrorIs(t, err, errDeclined)
	assert.NotErrorIs(t, err, errOutOfStock)
	for _, junk := range [][]byte{nil, {0xff}, {5, 'a'}} {
		assert.NotPanics(t, func() { _ = idemkit.FinalErrors(errDeclined).DecodeError(junk) })
	}
}
