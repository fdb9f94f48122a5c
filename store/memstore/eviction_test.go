package memstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/layout"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// These tests drive the engine over a default-configured Store, so that
// the claims and records are the engine's own, keyed by its key layout.

// flooded is how many keys another principal completes in the tests
// below: twice the capacity of the stores they use.
const flooded = 20_000

// complete runs n keys of principal to completion.
func completeKeys(t *testing.T, e *idemkit.Engine, principal string, n int) {
	t.Helper()
	for i := range n {
		_, err := e.Do(ctx, "k"+strconv.Itoa(i), "", func(context.Context) ([]byte, error) {
			return []byte("ok"), nil
		}, idemkit.WithScope(principal))
		require.NoError(t, err)
	}
}

// TestCompletedRecordSurvivesAnotherScopesFlood is the demo's case of
// issue 27: alice completes a charge, another principal completes 20,000
// keys in a store of 10,000 entries, and alice's retry must replay, not
// charge again. The flooding scope holds the most entries, so it gives
// first.
func TestCompletedRecordSurvivesAnotherScopesFlood(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(flooded/2))
	e := testkit.NewEngineOn(t, s)
	var charges atomic.Int32
	charge := func(context.Context) ([]byte, error) {
		charges.Add(1)
		return []byte("charged"), nil
	}
	_, err := e.Do(ctx, "charge-1", "", charge, idemkit.WithScope("alice"))
	require.NoError(t, err)
	completeKeys(t, e, "mallory", flooded)
	res, err := e.Do(ctx, "charge-1", "", charge, idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.True(t, res.Replayed, "alice's retry ran again")
	assert.Equal(t, int32(1), charges.Load(), "charges")
	assert.Positive(t, s.Evictions(), "the flood evicted nothing: the test proves nothing")
}

// TestClaimInProgressSurvivesFlood is the proxy's case of issue 27: a
// slow request's claim, still within its lease, must survive another
// principal's flood of completed keys; a retry while it runs gets
// ErrInProgress, and after it ends the stored result.
func TestClaimInProgressSurvivesFlood(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(flooded/2))
	e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Minute))
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	slow := func(context.Context) ([]byte, error) {
		if runs.Add(1) == 1 { // only the first execution waits
			close(started)
			<-release
		}
		return []byte("slow"), nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Do(ctx, "slow", "", slow, idemkit.WithScope("victim"))
		done <- err
	}()
	<-started
	completeKeys(t, e, "mallory", flooded)
	_, err := e.Do(ctx, "slow", "", slow, idemkit.WithScope("victim"))
	assert.ErrorIs(t, err, idemkit.ErrInProgress, "a retry while the first runs")
	close(release)
	require.NoError(t, <-done)
	res, err := e.Do(ctx, "slow", "", slow, idemkit.WithScope("victim"))
	require.NoError(t, err)
	assert.True(t, res.Replayed)
	assert.Equal(t, int32(1), runs.Load(), "executions")
	assert.Positive(t, s.Evictions(), "the flood evicted nothing: the test proves nothing")
}

// TestFullOfClaimsRefuses fills a store with claims in progress: the next
// claim is refused with an error wrapping ErrFull and store.ErrUnavailable
// (the engine answers ErrUnavailable and does not run the work), no claim
// is evicted, and once a claim completes there is room again.
func TestFullOfClaimsRefuses(t *testing.T) {
	const capacity = 16
	var refused atomic.Int32
	s := newStore(t, memstore.WithCapacity(capacity), memstore.WithShards(1),
		memstore.WithOnFull(func(string) { refused.Add(1) }))
	e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Minute))
	release := make(chan struct{})
	var running sync.WaitGroup
	var wg sync.WaitGroup
	for i := range capacity {
		running.Add(1)
		wg.Go(func() {
			_, err := e.Do(ctx, "k"+strconv.Itoa(i), "", func(context.Context) ([]byte, error) {
				running.Done()
				<-release
				return []byte("ok"), nil
			}, idemkit.WithScope("p"+strconv.Itoa(i%3)))
			assert.NoError(t, err)
		})
	}
	running.Wait()

	ran := false
	_, err := e.Do(ctx, "late", "", func(context.Context) ([]byte, error) {
		ran = true
		return nil, nil
	}, idemkit.WithScope("late"))
	assert.ErrorIs(t, err, idemkit.ErrUnavailable)
	assert.ErrorIs(t, err, memstore.ErrFull)
	assert.False(t, ran, "the work ran without a claim")
	assert.Equal(t, uint64(1), s.Refusals())
	assert.Equal(t, int32(1), refused.Load())
	assert.Zero(t, s.Evictions(), "a claim in progress was evicted")

	_, _, err = s.SetNX(ctx, "not-a-claim", []byte("v"), time.Minute)
	assert.ErrorIs(t, err, memstore.ErrFull, "a raw write")
	assert.ErrorIs(t, err, store.ErrUnavailable)

	close(release)
	wg.Wait()
	res, err := e.Do(ctx, "late", "", func(context.Context) ([]byte, error) {
		ran = true
		return nil, nil
	}, idemkit.WithScope("late"))
	require.NoError(t, err)
	assert.False(t, res.Replayed)
	assert.True(t, ran)
	assert.Equal(t, uint64(1), s.Evictions(), "the late claim evicted one completed record")
}

// TestClaimRaceUnderFlood races 32 goroutines claiming one key while
// another scope floods the store: exactly one runs the work, every other
// gets the stored result or ErrInProgress, and none is refused.
func TestClaimRaceUnderFlood(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(2000))
	e := testkit.NewEngineOn(t, s, idemkit.WithLease(time.Minute))
	for round := range 20 {
		key := "order-" + strconv.Itoa(round)
		var runs atomic.Int32
		var wg sync.WaitGroup
		wg.Go(func() { completeKeys(t, e, "flood"+strconv.Itoa(round), 500) })
		for range 32 {
			wg.Go(func() {
				_, err := e.Do(ctx, key, "", func(context.Context) ([]byte, error) {
					runs.Add(1)
					time.Sleep(time.Millisecond)
					return []byte("ok"), nil
				}, idemkit.WithScope("victim"))
				if err != nil && !errors.Is(err, idemkit.ErrInProgress) {
					t.Errorf("Do: %v", err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(1), runs.Load(), "round %d: executions", round)
	}
	assert.Zero(t, s.Refusals())
}

// claimValue is a value in the engine's record layout of a claim in
// progress; layout_test checks it against the engine's own.
func claimValue() []byte {
	return append([]byte{layout.RecordVersion, layout.StateInProgress}, make([]byte, layout.RecordHeaderLen-1)...)
}

// engineKey is a key in the engine's layout in scope.
func engineKey(scope, key string) string {
	return "idem:1:" + scope + ":" + key
}

// TestFullestScopeGivesFirst fills one shard with two scopes' completed
// records, then writes a third scope's keys: every eviction falls on the
// scope holding the most evictable entries at the time, least recently
// used first, so the smallest scope keeps all of its records.
func TestFullestScopeGivesFirst(t *testing.T) {
	var log evictLog
	s := newStore(t, memstore.WithCapacity(10), memstore.WithShards(1), log.option())
	for i := range 3 {
		set(t, s, engineKey("alice", strconv.Itoa(i)), time.Hour)
		complete(t, s, engineKey("alice", strconv.Itoa(i)), []byte("done"))
	}
	for i := range 7 {
		set(t, s, engineKey("bob", strconv.Itoa(i)), time.Hour)
		complete(t, s, engineKey("bob", strconv.Itoa(i)), []byte("done"))
	}
	for i := range 5 {
		set(t, s, engineKey("carol", strconv.Itoa(i)), time.Hour)
	}
	// bob holds 7, then 6, 5, 4 (against carol's 1, 2, 3): he gives four;
	// then carol, at 4 against bob's and alice's 3, gives her oldest.
	assert.Equal(t, []string{
		engineKey("bob", "0"), engineKey("bob", "1"), engineKey("bob", "2"), engineKey("bob", "3"),
		engineKey("carol", "0"),
	}, log.snapshot())
	for i := range 3 {
		_, err := s.Get(ctx, engineKey("alice", strconv.Itoa(i)))
		assert.NoError(t, err, "alice's record %d", i)
	}
}

// TestClaimsAreNeverEvicted fills a shard with claims in progress in
// several scopes and one completed record: new entries evict the record,
// then each other, then are refused with ErrFull once only claims are
// left; every claim is still there.
func TestClaimsAreNeverEvicted(t *testing.T) {
	var log evictLog
	s := newStore(t, memstore.WithCapacity(5), memstore.WithShards(1), log.option())
	claims := make([]string, 4)
	for i := range claims {
		claims[i] = engineKey("p"+strconv.Itoa(i), "claim")
		ok, _, err := s.SetNX(ctx, claims[i], claimValue(), time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
	}
	set(t, s, engineKey("p0", "record"), time.Hour)
	complete(t, s, engineKey("p0", "record"), []byte("done"))
	set(t, s, engineKey("p9", "new"), time.Hour)
	ok, _, err := s.SetNX(ctx, engineKey("p9", "claim"), claimValue(), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{engineKey("p0", "record"), engineKey("p9", "new")}, log.snapshot())

	_, _, err = s.SetNX(ctx, engineKey("p9", "newer"), []byte("v"), time.Hour)
	assert.ErrorIs(t, err, memstore.ErrFull)
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.NotContains(t, err.Error(), "p9", "the error names the key")
	assert.Equal(t, uint64(1), s.Refusals())
	assert.Equal(t, uint64(2), s.Evictions())
	for _, k := range append(claims, engineKey("p9", "claim")) {
		_, err := s.Get(ctx, k)
		assert.NoError(t, err, k)
	}

	// A heartbeat (the same value, a new TTL) keeps a claim a claim; its
	// completion makes it evictable again.
	ok, err = s.CompareAndSwap(ctx, claims[0], claimValue(), claimValue(), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, err = s.SetNX(ctx, engineKey("p9", "newer"), []byte("v"), time.Hour)
	assert.ErrorIs(t, err, memstore.ErrFull, "a heartbeat made a claim evictable")
	complete(t, s, claims[0], []byte("done"))
	set(t, s, engineKey("p9", "newer"), time.Hour)
	assert.Equal(t, claims[0], log.snapshot()[2])
}

// TestGrowingSwapRefusedAmongClaims grows a record by CompareAndSwap in a
// shard whose other entries are claims in progress: the swap is refused
// with ErrFull and changes nothing.
func TestGrowingSwapRefusedAmongClaims(t *testing.T) {
	claim := claimValue()
	cost := int64(len(engineKey("a", "claim"))+len(claim)) + memstore.EntryOverhead + int64(len("a")) + 160
	s := newStore(t, memstore.WithMaxBytes(4*cost), memstore.WithShards(1))
	for _, p := range []string{"a", "b", "c"} {
		ok, _, err := s.SetNX(ctx, engineKey(p, "claim"), claim, time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
	}
	set(t, s, engineKey("d", "claim"), time.Hour)
	ok, err := s.CompareAndSwap(ctx, engineKey("d", "claim"), []byte(engineKey("d", "claim")), make([]byte, 2*cost), time.Hour)
	assert.ErrorIs(t, err, memstore.ErrFull)
	assert.False(t, ok)
	ent, err := s.Get(ctx, engineKey("d", "claim"))
	require.NoError(t, err)
	assert.Equal(t, engineKey("d", "claim"), string(ent.Value), "the refused swap changed the value")
	assert.Zero(t, s.Evictions())
	assert.LessOrEqual(t, s.Bytes(), 4*cost)
}

// TestScopeQuotaOfClaimsRefusesOnlyThatScope fills one scope's quota with
// claims in progress: that scope's next write is refused, another scope's
// is not.
func TestScopeQuotaOfClaimsRefusesOnlyThatScope(t *testing.T) {
	s := newStore(t, memstore.WithCapacity(100), memstore.WithShards(1), memstore.WithScopeQuota(3, idemkit.ScopeOf))
	for i := range 3 {
		ok, _, err := s.SetNX(ctx, engineKey("busy", strconv.Itoa(i)), claimValue(), time.Hour)
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, _, err := s.SetNX(ctx, engineKey("busy", "3"), []byte("v"), time.Hour)
	assert.ErrorIs(t, err, memstore.ErrFull)
	assert.ErrorContains(t, err, "quota")
	set(t, s, engineKey("calm", "0"), time.Hour)
	assert.Zero(t, s.Evictions())
	assert.Equal(t, uint64(1), s.Refusals())
}

// TestLayoutMatchesTheEngine checks the storage layout memstore reads
// against the engine's own writes: the claim of a running Do is a claim
// in progress in the scope idemkit.ScopeOf names, and its completed
// record is not a claim.
func TestLayoutMatchesTheEngine(t *testing.T) {
	s := newStore(t)
	e := testkit.NewEngineOn(t, s)
	inProgress := func() (n int) {
		require.NoError(t, s.Scan(ctx, "", func(key string, ent store.Entry) bool {
			if layout.InProgress(ent.Value) {
				n++
			}
			assert.Equal(t, idemkit.ScopeOf(key), layout.ScopeOf(key))
			assert.NotEmpty(t, layout.ScopeOf(key))
			return true
		}))
		return n
	}
	_, err := e.Do(ctx, "k", "fp", func(context.Context) ([]byte, error) {
		assert.Equal(t, 1, inProgress(), "the running claim")
		return []byte("ok"), nil
	}, idemkit.WithScope("alice"))
	require.NoError(t, err)
	assert.Zero(t, inProgress(), "the completed record")
	assert.Equal(t, 1, s.Len())
}
