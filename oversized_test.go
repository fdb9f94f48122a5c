package idemkit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// oversizedStores are the stores the oversized-result tests run over: the
// memory store and a bbolt file.
func oversizedStores() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memstore": func(t *testing.T) store.Store { return testkit.NewMem(t) },
		"boltstore": func(t *testing.T) store.Store {
			s, err := boltstore.Open(filepath.Join(t.TempDir(), "idem.db"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

const oversizedCap = 16

// oversized is a result over oversizedCap.
var oversized = bytes.Repeat([]byte("x"), oversizedCap+1)

// TestDoOversizedResultRunsOnce sends one key from many goroutines at once
// while fn returns a result over the size cap. Exactly one call runs fn;
// the others, and every later call, get an error wrapping
// ErrResultTooLarge, marked replayed, and fn does not run again.
func TestDoOversizedResultRunsOnce(t *testing.T) {
	for name, open := range oversizedStores() {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &testkit.Recorder{}
				e, err := idemkit.New(open(t), idemkit.WithObserver(rec), idemkit.WithMaxResultSize(oversizedCap))
				require.NoError(t, err)
				const callers = 50
				var runs atomic.Int32
				fn := func(context.Context) ([]byte, error) {
					runs.Add(1)
					time.Sleep(20 * time.Millisecond) // let the others arrive while it runs
					return oversized, nil
				}
				results := make([]idemkit.Result, callers)
				errs := make([]error, callers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range callers {
					wg.Go(func() {
						<-start
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						results[i], errs[i] = e.Do(ctx, "order-1", "fp", fn, idemkit.WithWait(time.Millisecond))
					})
				}
				close(start)
				wg.Wait()
				require.EqualValues(t, 1, runs.Load(), "fn ran more than once")
				fresh := 0
				for i := range callers {
					require.ErrorIs(t, errs[i], idemkit.ErrResultTooLarge, "call %d", i)
					if results[i].Replayed {
						assert.Nil(t, results[i].Value, "a replay holds no result")
						continue
					}
					fresh++
					assert.Equal(t, oversized, results[i].Value, "the call that ran gets fn's value")
				}
				assert.Equal(t, 1, fresh, "one call ran, the others were replays")
				for range 5 {
					res, err := e.Do(context.Background(), "order-1", "fp", fn)
					require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
					assert.True(t, res.Replayed)
				}
				assert.EqualValues(t, 1, runs.Load(), "a retry ran fn again")
				assert.Equal(t, 1, rec.Count(idemkit.EventTooLarge))
				assert.Zero(t, rec.Count(idemkit.EventReleased), "the key was released")

				info, err := e.Inspect(context.Background(), idemkit.ModeDo, "order-1")
				require.NoError(t, err)
				assert.Equal(t, idemkit.StateTooLarge, info.State)
				assert.Zero(t, info.ResultSize, "nothing of the result is kept")
				_, err = e.StoredResult(context.Background(), idemkit.ModeDo, "order-1")
				require.ErrorIs(t, err, store.ErrNotFound)
			})
		})
	}
}

// TestDoOversizedResultReleaseKey checks the opt-out: with ReleaseKey the
// key is released, as before, so a retry runs fn again.
func TestDoOversizedResultReleaseKey(t *testing.T) {
	for name, open := range oversizedStores() {
		t.Run(name, func(t *testing.T) {
			e, err := idemkit.New(open(t), idemkit.WithObserver(nil), idemkit.WithMaxResultSize(oversizedCap),
				idemkit.WithOversized(idemkit.ReleaseKey))
			require.NoError(t, err)
			ctx := context.Background()
			var runs atomic.Int32
			fn := func(context.Context) ([]byte, error) { runs.Add(1); return oversized, nil }
			for i := range 3 {
				res, err := e.Do(ctx, "order-1", "fp", fn)
				require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
				assert.False(t, res.Replayed)
				assert.EqualValues(t, i+1, runs.Load(), "the retry did not run fn")
			}
			testkit.RequireReleased(t, e, idemkit.ModeDo, "order-1", "the key was kept")
		})
	}
}

func TestWithOversizedRejectsUnknownValues(t *testing.T) {
	s := testkit.NewMem(t)
	for _, o := range []idemkit.Oversized{-1, idemkit.ReleaseKey + 1} {
		_, err := idemkit.New(s, idemkit.WithOversized(o))
		require.ErrorIs(t, err, idemkit.ErrInvalid, "%d", o)
	}
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithMaxResultSize(oversizedCap))
	require.NoError(t, err)
	_, err = e.With(idemkit.WithOversized(7))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	_, err = e.Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return nil, nil },
		idemkit.WithOversized(7))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
}

// TestDoOversizedPerCall chooses the behaviour per call and per view.
func TestDoOversizedPerCall(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithMaxResultSize(oversizedCap), idemkit.WithOversized(idemkit.ReleaseKey))
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(context.Context) ([]byte, error) { runs.Add(1); return oversized, nil }
	view, err := e.With(idemkit.WithOversized(idemkit.KeepTerminal))
	require.NoError(t, err)
	for range 3 {
		_, err = view.Do(ctx, "view", "", fn)
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	}
	assert.EqualValues(t, 1, runs.Load())
	for range 3 {
		_, err = e.Do(ctx, "call", "", fn, idemkit.WithOversized(idemkit.KeepTerminal))
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	}
	assert.EqualValues(t, 2, runs.Load())
}

// TestClaimCompleteOversized ends a Begin claim with an oversized value:
// the repeat is a replay of ErrResultTooLarge, with no claim to run.
func TestClaimCompleteOversized(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithMaxResultSize(oversizedCap))
	ctx := context.Background()
	c, _, err := e.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	require.NotNil(t, c)
	defer c.Release(ctx)
	require.ErrorIs(t, c.Complete(ctx, oversized), idemkit.ErrResultTooLarge)
	c2, res, err := e.Begin(ctx, "k", "fp")
	assert.Nil(t, c2, "the repeat was admitted")
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	assert.True(t, res.Replayed)

	// A mismatching repeat is still a mismatch.
	_, _, err = e.Begin(ctx, "k", "other")
	require.ErrorIs(t, err, idemkit.ErrMismatch)

	// The record over the store's value limit is treated the same way.
	big, err := idemkit.New(testkit.NewMem(t), idemkit.WithObserver(nil), idemkit.WithMaxResultSize(store.MaxValueLen))
	require.NoError(t, err)
	c, _, err = big.Begin(ctx, "k", "fp")
	require.NoError(t, err)
	require.ErrorIs(t, c.Complete(ctx, make([]byte, store.MaxValueLen)), idemkit.ErrResultTooLarge)
	_, res, err = big.Begin(ctx, "k", "fp")
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	assert.True(t, res.Replayed)
}

// TestUseTokenOversized: the token's reuse gets ErrResultTooLarge, or
// ErrTokenUsed with ReleaseKey (the token is spent, never reissued).
func TestUseTokenOversized(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		o    idemkit.Oversized
		want error
	}{{idemkit.KeepTerminal, idemkit.ErrResultTooLarge}, {idemkit.ReleaseKey, idemkit.ErrTokenUsed}} {
		e := testkit.NewEngine(t, idemkit.WithMaxResultSize(oversizedCap), idemkit.WithOversized(tc.o))
		tok, err := e.IssueToken(ctx, "alice")
		require.NoError(t, err)
		runs := 0
		fn := func(context.Context) ([]byte, error) { runs++; return oversized, nil }
		_, err = e.UseToken(ctx, "alice", tok.Value, fn)
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
		_, err = e.UseToken(ctx, "alice", tok.Value, fn)
		require.ErrorIs(t, err, tc.want)
		assert.Equal(t, 1, runs)
	}
}

// TestCompleteInOversized: CompleteIn refuses an oversized value with
// ErrResultTooLarge. Under KeepTerminal it writes the terminal record in
// the transaction all the same: a caller that rolls back (as told) frees
// the key with its work undone, and one that commits anyway leaves a key
// whose repeats never run the work again. Under ReleaseKey it writes
// nothing, and the claim is removed only once the transaction ended.
func TestCompleteInOversized(t *testing.T) {
	ctx := context.Background()
	for _, o := range []idemkit.Oversized{idemkit.KeepTerminal, idemkit.ReleaseKey} {
		mem := testkit.NewMem(t)
		e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithMaxResultSize(oversizedCap), idemkit.WithOversized(o))
		require.NoError(t, err)
		runs := 0
		work := func(commit bool) func(ctx context.Context) ([]byte, error) {
			return func(ctx context.Context) ([]byte, error) {
				runs++
				c := idemkit.ClaimFromContext(ctx)
				tx := storetest.NewTx(mem)
				err := c.CompleteIn(ctx, tx, oversized)
				require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
				// Until the transaction ends, the key stays claimed.
				_, err = e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return nil, errors.New("must not run") })
				require.ErrorIs(t, err, idemkit.ErrInProgress, "oversized %d", o)
				if commit {
					tx.Commit()
					return []byte("committed anyway"), nil
				}
				return nil, err
			}
		}
		// Rolled back: the key is free again, whatever the setting.
		_, err = e.Do(ctx, "k", "", work(false))
		require.ErrorIs(t, err, idemkit.ErrInProgress)
		testkit.RequireReleased(t, e, idemkit.ModeDo, "k", fmt.Sprintf("oversized %d: a rolled-back claim was kept", o))

		// Committed despite the error.
		res, err := e.Do(ctx, "k", "", work(true))
		assert.Equal(t, "committed anyway", string(res.Value))
		require.Equal(t, 2, runs)
		if o == idemkit.ReleaseKey {
			require.NoError(t, err)
			testkit.RequireReleased(t, e, idemkit.ModeDo, "k", "an oversized result under ReleaseKey")
			continue
		}
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
		res, err = e.Do(ctx, "k", "", work(true))
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
		assert.True(t, res.Replayed)
		assert.Equal(t, 2, runs, "a committed terminal record was run again")
	}
}

// TestOversizedRecordIsSettled: caches and copy-forward treat the
// terminal record as the claim's final state.
func TestOversizedRecordIsSettled(t *testing.T) {
	mem := testkit.NewMem(t)
	e, err := idemkit.New(mem, idemkit.WithObserver(nil), idemkit.WithMaxResultSize(oversizedCap))
	require.NoError(t, err)
	ctx := context.Background()
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	sk := idemkit.StoreKey(e, idemkit.ModeDo, "", "k")
	held, err := mem.Get(ctx, sk)
	require.NoError(t, err)
	require.ErrorIs(t, c.Complete(ctx, oversized), idemkit.ErrResultTooLarge)
	final, err := mem.Get(ctx, sk)
	require.NoError(t, err)
	assert.True(t, idemkit.Settled(final.Value))
	assert.True(t, idemkit.Supersedes(held.Value, final.Value))
	assert.False(t, idemkit.Supersedes(final.Value, held.Value))
	info, err := idemkit.Describe(idemkit.ModeDo, final)
	require.NoError(t, err)
	assert.Equal(t, idemkit.StateTooLarge, info.State)
}

// TestDoRecordRefusedByTheStoreKeepsTerminal: a result under the engine's
// cap that the store itself refuses (memstore's byte budget) cannot be
// kept either: the key keeps a terminal record and the work runs once.
func TestDoRecordRefusedByTheStoreKeepsTerminal(t *testing.T) {
	st, err := memstore.New(memstore.WithMaxBytes(64<<10), memstore.WithShards(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	e, err := idemkit.New(st, idemkit.WithObserver(nil))
	require.NoError(t, err)
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return make([]byte, 200<<10), nil }
	_, err = e.Do(context.Background(), "k", "", fn)
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err := e.Do(context.Background(), "k", "", fn)
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	require.True(t, res.Replayed)
	require.Equal(t, 1, runs)
}

// TestCompleteInFailureDoesNotReleaseBeforeTheTransactionEnds: a
// transaction view that fails the completion leaves the claim in place
// until the caller, having rolled back, releases it.
func TestCompleteInFailureDoesNotReleaseBeforeTheTransactionEnds(t *testing.T) {
	e := testkit.NewEngine(t)
	ctx := context.Background()
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	require.NotNil(t, c)
	err = c.CompleteIn(ctx, failingCAS{e.Store()}, []byte("v"))
	require.Error(t, err)
	info, err := e.Inspect(ctx, idemkit.ModeDo, "k")
	require.NoError(t, err, "the claim was released while the transaction was open")
	require.Equal(t, idemkit.StateInProgress, info.State)
	c.Release(ctx)
	testkit.RequireReleased(t, e, idemkit.ModeDo, "k", "released after the transaction")
}

// failingCAS is a transaction view whose CompareAndSwap fails.
type failingCAS struct{ store.Store }

func (failingCAS) CompareAndSwap(context.Context, string, []byte, []byte, time.Duration) (bool, error) {
	return false, errors.New("statement failed")
}

// TestDoRecordRefusedByTheStoreReleaseKey: under ReleaseKey, a result the
// store itself refuses (memstore's byte budget) is an oversized result like
// any other: the key is released, the caller gets ErrResultTooLarge, and
// the observer sees EventTooLarge.
func TestDoRecordRefusedByTheStoreReleaseKey(t *testing.T) {
	st, err := memstore.New(memstore.WithMaxBytes(64<<10), memstore.WithShards(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var tooLarge atomic.Int32
	obs := idemkit.ObserverFunc(func(_ context.Context, ev idemkit.Event) {
		if ev.Kind == idemkit.EventTooLarge {
			tooLarge.Add(1)
		}
	})
	e, err := idemkit.New(st, idemkit.WithObserver(obs), idemkit.WithOversized(idemkit.ReleaseKey))
	require.NoError(t, err)
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) { runs++; return make([]byte, 200<<10), nil }
	for i := range 2 {
		res, err := e.Do(ctx, "k", "", fn)
		require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
		require.False(t, res.Replayed)
		require.Equal(t, i+1, runs, "the key was not released")
	}
	require.EqualValues(t, 2, tooLarge.Load())
	testkit.RequireReleased(t, e, idemkit.ModeDo, "k", "the key was kept")
}

func TestDoResultTooLarge(t *testing.T) {
	e := testkit.NewEngine(t, idemkit.WithMaxResultSize(8))
	ctx := context.Background()
	_, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return bytes.Repeat([]byte("x"), 9), nil })
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err := e.Do(ctx, "k", "", func(context.Context) ([]byte, error) { return []byte("small"), nil })
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge, "the key was released")
	assert.True(t, res.Replayed)
	assert.Contains(t, err.Error(), "(9 bytes)")

	_, err = e.Do(ctx, "r", "", func(context.Context) ([]byte, error) { return bytes.Repeat([]byte("x"), 9), nil },
		idemkit.WithOversized(idemkit.ReleaseKey))
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err = e.Do(ctx, "r", "", func(context.Context) ([]byte, error) { return []byte("small"), nil })
	require.NoError(t, err, "ReleaseKey kept the key")
	assert.Equal(t, "small", string(res.Value))
}

// A result under the engine's cap whose record exceeds the store's value
// limit was refused by the store with ErrInvalid, which the engine
// reported as ErrUnavailable (a policy layer counts it as an outage),
// leaving the key claimed until the lease expired. It is a result too
// large to keep like any other: a terminal record by default.
func TestDoResultOverStoreLimitIsTooLarge(t *testing.T) {
	s := testkit.NewMem(t)
	e, err := idemkit.New(s, idemkit.WithObserver(nil), idemkit.WithMaxResultSize(store.MaxValueLen))
	if err != nil {
		// Rejecting a cap the store cannot hold is an acceptable fix too.
		require.ErrorIs(t, err, idemkit.ErrInvalid)
		return
	}
	ctx := context.Background()
	fp := strings.Repeat("f", 64)
	_, err = e.Do(ctx, "k", fp, func(context.Context) ([]byte, error) { return make([]byte, store.MaxValueLen), nil })
	require.Error(t, err)
	assert.NotErrorIs(t, err, idemkit.ErrUnavailable, "the store did not fail; the record was too large")
	assert.ErrorIs(t, err, idemkit.ErrResultTooLarge)
	res, err := e.Do(ctx, "k", fp, func(context.Context) ([]byte, error) { return []byte("small"), nil })
	require.ErrorIs(t, err, idemkit.ErrResultTooLarge, "the key must keep its terminal record as for any refused result")
	assert.True(t, res.Replayed)
}
