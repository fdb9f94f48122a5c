package idemkit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

// downstream is a system that fences its writes: it refuses a token lower
// than the highest it has seen for a key, as the payment provider
// does.
type downstream struct {
	mu       sync.Mutex
	highest  uint64
	accepted []uint64
}

func (d *downstream) write(fence uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if fence < d.highest {
		return false
	}
	d.highest = fence
	d.accepted = append(d.accepted, fence)
	return true
}

// stoppedClock is an engine clock that never moves, so that tokens come
// from the key's record alone, not from the clock (see fence.go).
var stoppedClock = idemkit.WithClock(func() time.Time { return time.Unix(1e9, 0) })

// Every claim of a key gets a larger token than every earlier claim, first
// or takeover, across released claims and leases that ended with the
// owner paused; the token is the same through the claim's context, the
// Claim and Inspect; outside a claim there is none.
func TestFenceIncreasesOverClaimsOfAKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat(), stoppedClock)
		_, ok := idemkit.FenceFromContext(ctx)
		assert.False(t, ok, "no token outside a claim")

		var tokens []uint64
		fail := errors.New("not final")
		for i := range 6 {
			_, err := e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
				f, ok := idemkit.FenceFromContext(ctx)
				require.True(t, ok)
				require.Equal(t, f, idemkit.ClaimFromContext(ctx).Fence())
				info, err := e.Inspect(ctx, idemkit.ModeDo, "k")
				require.NoError(t, err)
				require.Equal(t, f, info.Fence)
				tokens = append(tokens, f)
				if i%2 == 1 {
					time.Sleep(50 * time.Millisecond) // past the lease: the next claim takes it over
				}
				return nil, fail
			})
			require.ErrorIs(t, err, fail)
		}
		c, _, err := e.Begin(ctx, "k", "")
		require.NoError(t, err)
		tokens = append(tokens, c.Fence())
		require.NoError(t, c.Complete(ctx, []byte("done")))
		for i := 1; i < len(tokens); i++ {
			assert.Greater(t, tokens[i], tokens[i-1], "claim %d", i)
		}
	})
}

// A caller paused past its lease, whose key another caller took over,
// resumes with its old token: a fenced downstream refuses it, and the
// caller learns it lost the lease when it completes.
func TestFenceRefusesAPausedOwnerAfterATakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(30*time.Millisecond), idemkit.WithoutHeartbeat())
		d := &downstream{}
		first, _, err := e.Begin(ctx, "pay-1", "fp")
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond) // paused past the lease

		second, _, err := e.Begin(ctx, "pay-1", "fp")
		require.NoError(t, err, "the lease ended: the key is taken over")
		require.Greater(t, second.Fence(), first.Fence())
		require.True(t, d.write(second.Fence()))
		require.NoError(t, second.Complete(ctx, []byte("charged")))

		assert.False(t, d.write(first.Fence()), "the downstream refuses the stale owner")
		require.ErrorIs(t, first.Complete(ctx, []byte("charged twice")), idemkit.ErrLeaseLost)
		assert.Equal(t, []uint64{second.Fence()}, d.accepted)
	})
}

// Many callers race for one key whose claims fail, release, or stall past
// their lease: tokens never repeat, and in the order claims were won
// (which, in a synctest bubble, is the order their work starts: no time
// passes between) they only grow. A fenced downstream accepts writes in
// token order only; every write it refused came from an owner whose key
// was taken over.
func TestFenceRaceOfManyCallersAtOneKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		e := testkit.NewEngine(t, idemkit.WithLease(20*time.Millisecond), idemkit.WithoutHeartbeat(), stoppedClock)
		d := &downstream{}
		var mu sync.Mutex
		var won []uint64
		refusedCurrent := 0
		fail := errors.New("not final")
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 7))
				for range 2000 {
					mu.Lock()
					enough := len(won) >= 300
					mu.Unlock()
					if enough {
						return
					}
					_, _ = e.Do(ctx, "k", "", func(ctx context.Context) ([]byte, error) {
						f, _ := idemkit.FenceFromContext(ctx)
						mu.Lock()
						won = append(won, f)
						mu.Unlock()
						time.Sleep(time.Duration(r.IntN(30)) * time.Millisecond) // some stall past the lease
						if !d.write(f) {
							info, err := e.Inspect(ctx, idemkit.ModeDo, "k")
							if err == nil && info.Fence == f {
								mu.Lock()
								refusedCurrent++ // refused while still the owner: a token went backwards
								mu.Unlock()
							}
						}
						return nil, fail
					})
					time.Sleep(time.Duration(r.IntN(5)) * time.Millisecond)
				}
			})
		}
		wg.Wait()
		require.GreaterOrEqual(t, len(won), 300)
		seen := map[uint64]bool{}
		for i, f := range won {
			require.False(t, seen[f], "token %d repeated", f)
			seen[f] = true
			if i > 0 {
				require.Greater(t, f, won[i-1], "claim %d", i)
			}
		}
		assert.Zero(t, refusedCurrent)
		for i := 1; i < len(d.accepted); i++ {
			require.GreaterOrEqual(t, d.accepted[i], d.accepted[i-1])
		}
		t.Logf("%d claims, %d writes accepted", len(won), len(d.accepted))
	})
}

// A batch claim of a released key takes it over with the next token, and
// a new engine over the same store continues the key's tokens.
func TestFenceOverBatchesAndEngines(t *testing.T) {
	ctx := context.Background()
	mem := testkit.NewMem(t)
	e := testkit.NewEngineOn(t, mem)
	c, _, err := e.Begin(ctx, "k", "")
	require.NoError(t, err)
	first := c.Fence()
	c.Release(ctx)

	out, err := e.BeginBatch(ctx, []idemkit.BatchRequest{{Key: "k"}, {Key: "other"}})
	require.NoError(t, err)
	require.NotNil(t, out[0].Claim)
	require.Greater(t, out[0].Claim.Fence(), first)
	out[0].Claim.Release(ctx)
	out[1].Claim.Release(ctx)

	e2 := testkit.NewEngineOn(t, mem, idemkit.WithClock(func() time.Time { return time.Unix(0, 0) }))
	c, _, err = e2.Begin(ctx, "k", "")
	require.NoError(t, err)
	assert.Greater(t, c.Fence(), out[0].Claim.Fence(), "a clock far behind does not lower the token of a key with a record")
	require.NoError(t, c.Complete(ctx, nil))
}

// gatedBeats holds the heartbeats of one engine's claims until released.
type gatedBeats struct {
	store.Store
	gate chan struct{} // closed to let beats through
	held chan struct{} // receives when a beat waits at the gate
}

func (g *gatedBeats) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	if idemkit.IsBeat(old, nw) {
		select {
		case g.held <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return g.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

// beforeSwap runs hook before each of its store's CompareAndSwap calls.
type beforeSwap struct {
	store.Store
	hook func()
}

func (b *beforeSwap) CompareAndSwap(ctx context.Context, k string, old, nw []byte, ttl time.Duration) (bool, error) {
	b.hook()
	return b.Store.CompareAndSwap(ctx, k, old, nw, ttl)
}

// A heartbeat that lands after a takeover read the record, but before its
// swap, makes the swap fail: the lease it renewed is not overwritten, and
// the would-be taker finds the key in progress.
func TestFenceTakeoverLosesToALateBeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := testkit.NewMem(t)
		owner := &gatedBeats{Store: mem, gate: make(chan struct{}), held: make(chan struct{}, 1)}
		eo := testkit.NewEngineOn(t, owner, idemkit.WithLease(30*time.Millisecond), idemkit.WithHeartbeat(10*time.Millisecond))
		c, _, err := eo.Begin(ctx, "k", "")
		require.NoError(t, err)
		<-owner.held // the first beat waits
		time.Sleep(40 * time.Millisecond)

		var once sync.Once
		taker := &beforeSwap{Store: mem, hook: func() {
			once.Do(func() {
				close(owner.gate) // the late beat lands now
				synctest.Wait()
			})
		}}
		et := testkit.NewEngineOn(t, taker, idemkit.WithLease(30*time.Millisecond))
		_, _, err = et.Begin(ctx, "k", "")
		require.ErrorIs(t, err, idemkit.ErrInProgress, "the renewed lease holds")
		require.NoError(t, c.Complete(ctx, []byte("done")), "the owner keeps the key")
	})
}
