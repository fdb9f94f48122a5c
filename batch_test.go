package idemkit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// batcher adds store.Batcher to a store, one SetNX per item, and counts
// batch calls.
type batcher struct {
	store.Store
	calls atomic.Int32
	fail  error
}

func (b *batcher) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	b.calls.Add(1)
	if err := store.CheckBatch(items); err != nil {
		return nil, err
	}
	out := make([]store.BatchResult, len(items))
	for i, it := range items {
		set, ex, err := b.Store.SetNX(ctx, it.Key, it.Value, it.TTL)
		if err != nil {
			return nil, err
		}
		out[i] = store.BatchResult{Set: set, Existing: ex}
	}
	return out, b.fail
}

func TestBeginBatchDecidesEachItem(t *testing.T) {
	for _, withBatcher := range []bool{true, false} {
		t.Run(fmt.Sprintf("batcher=%v", withBatcher), func(t *testing.T) {
			mem := testkit.NewMem(t)
			var s store.Store = mem
			b := &batcher{Store: mem}
			if withBatcher {
				s = b
			}
			e, err := idemkit.New(s, idemkit.WithObserver(nil))
			require.NoError(t, err)
			ctx := context.Background()
			_, err = e.Do(ctx, "done", "fp", func(context.Context) ([]byte, error) { return []byte("stored"), nil })
			require.NoError(t, err)
			running, _, err := e.Begin(ctx, "running", "fp")
			require.NoError(t, err)
			defer running.Release(ctx)

			out, err := e.BeginBatch(ctx, []idemkit.BatchRequest{
				{Key: "new", Fingerprint: "fp"},
				{Key: "done", Fingerprint: "fp"},
				{Key: "running", Fingerprint: "fp"},
				{Key: "done", Fingerprint: "other"},
				{Key: "new", Fingerprint: "fp"},
				{Key: "", Fingerprint: "fp"},
			})
			require.NoError(t, err)
			require.Len(t, out, 6)
			require.NotNil(t, out[0].Claim, "a new key is admitted")
			assert.True(t, out[1].Result.Replayed)
			assert.Equal(t, "stored", string(out[1].Result.Value))
			assert.ErrorIs(t, out[2].Err, idemkit.ErrInProgress)
			assert.ErrorIs(t, out[3].Err, idemkit.ErrMismatch)
			assert.Nil(t, out[4].Claim, "a key twice in one batch is admitted once")
			assert.ErrorIs(t, out[4].Err, idemkit.ErrInProgress)
			assert.ErrorIs(t, out[5].Err, idemkit.ErrInvalid)
			require.NoError(t, out[0].Claim.Complete(ctx, []byte("v")))
			if withBatcher {
				assert.EqualValues(t, 1, b.calls.Load(), "one store call for the batch")
			}
		})
	}
}

func TestBeginBatchRaceHasOneWinnerPerKey(t *testing.T) {
	mem := testkit.NewMem(t)
	e, err := idemkit.New(&batcher{Store: mem}, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()
	const keys = 64
	wins := make([]atomic.Int32, keys)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			var reqs []idemkit.BatchRequest
			for k := range 32 { // overlapping windows of 32 keys
				reqs = append(reqs, idemkit.BatchRequest{Key: fmt.Sprint((g*4 + k) % keys)})
			}
			out, err := e.BeginBatch(ctx, reqs)
			if !assert.NoError(t, err) {
				return
			}
			for i, o := range out {
				if o.Claim != nil {
					var k int
					_, _ = fmt.Sscan(reqs[i].Key, &k)
					wins[k].Add(1)
					assert.NoError(t, o.Claim.Complete(ctx, []byte("v")))
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		assert.LessOrEqual(t, wins[k].Load(), int32(1), "key %d", k)
	}
}

func TestBeginBatchStoreFailureUndoesAndAppliesThePolicy(t *testing.T) {
	mem := testkit.NewMem(t)
	b := &batcher{Store: mem, fail: store.Unavailable("batch", errors.New("reply lost"))}
	e, err := idemkit.New(b, idemkit.WithObserver(nil))
	require.NoError(t, err)
	ctx := context.Background()
	out, err := e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "a"}, {Key: "b"}})
	require.NoError(t, err)
	for _, o := range out {
		assert.Nil(t, o.Claim)
		assert.ErrorIs(t, o.Err, idemkit.ErrUnavailable)
	}
	b.fail = nil
	out, err = e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "a"}, {Key: "b"}})
	require.NoError(t, err)
	for _, o := range out {
		assert.NotNil(t, o.Claim, "the failed batch's claims were undone")
	}

	open, err := idemkit.New(storetest.Unavailable(), idemkit.WithObserver(nil), idemkit.WithFailureMode(idemkit.FailOpen))
	require.NoError(t, err)
	out, err = open.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "a"}})
	require.NoError(t, err)
	assert.True(t, out[0].Result.Unguarded)
	assert.NoError(t, out[0].Err)
}
