package idemkit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/memstore"
)

// A panicking observer must not leave a claim held or a call unanswered.
func TestObserverPanicsAreRecovered(t *testing.T) {
	panicky := idemkit.ObserverFunc(func(context.Context, idemkit.Event) { panic("observer bug") })
	e := newEngine(t, idemkit.WithObserver(panicky))
	ctx := context.Background()
	runs := 0
	fail := func(context.Context) ([]byte, error) { runs++; return nil, errors.New("transient") }
	for range 2 {
		_, err := e.Do(ctx, "k", "", fail) // admitted, then released: both report
		require.EqualError(t, err, "transient")
	}
	assert.Equal(t, 2, runs, "the released key runs again")
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	require.NoError(t, err)
	res, err = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
	require.NoError(t, err)
	assert.True(t, res.Replayed)

	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }, idemkit.WithRelease(idemkit.ReleaseOnDone)))
	require.NoError(t, e.Guard(ctx, "g", func(context.Context) error { return nil }), "released despite the observer")
}

func TestAmbiguousClaimIsUndoneAndReported(t *testing.T) {
	mem := memstore.New()
	defer mem.Close()
	rec := &recorder{}
	e, err := idemkit.New(&quirky{Store: mem, mode: "wrote-but-failed"}, idemkit.WithObserver(rec))
	require.NoError(t, err)
	ctx := context.Background()
	err = e.Guard(ctx, "g", func(context.Context) error { return errors.New("must not run") })
	require.ErrorIs(t, err, idemkit.ErrUnavailable)
	assert.Equal(t, 1, rec.count(idemkit.EventAmbiguous))
	_, err = mem.Get(ctx, idemkit.StoreKey(e, idemkit.ModeGuard, "", "g"))
	require.Error(t, err, "the claim was undone before the caller was answered")
}
