package fencetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// blindSwap is a broken store whose CompareAndSwap ignores the old value
// when the key exists: a takeover, or a completion, wins over a record it
// never read.
type blindSwap struct{ store.Store }

func (b blindSwap) CompareAndSwap(ctx context.Context, key string, old, nw []byte, ttl time.Duration) (bool, error) {
	cur, err := b.Get(ctx, key)
	if err != nil {
		return false, nil
	}
	return b.Store.CompareAndSwap(ctx, key, cur.Value, nw, ttl)
}

// The race finds a store whose swaps do not compare: a stale owner
// completes over the key's new owner.
func TestFenceRaceFindsABlindSwap(t *testing.T) {
	mem, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	sh := shape{racers: 8, engines: 2, lease: 40 * time.Millisecond, duration: time.Second, maxClaims: 400}
	rep, violations, err := race(t.Context(), blindSwap{mem}, sh)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if len(violations) == 0 {
		t.Fatal("no violation found")
	}
	t.Log(strings.Join(violations, "\n"))
}
