package storetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store/storetest"
)

func TestTxAppliesSwapsOnCommit(t *testing.T) {
	ctx := context.Background()
	base := newRefStore(faults{})
	if set, _, err := base.SetNX(ctx, "k", []byte("claim"), time.Minute); err != nil || !set {
		t.Fatalf("SetNX = %v, %v", set, err)
	}
	tx := storetest.NewTx(base)
	if ok, err := tx.CompareAndSwap(ctx, "k", []byte("other"), []byte("done"), time.Minute); ok || err != nil {
		t.Fatalf("swap of a value the key does not hold = %v, %v; want false", ok, err)
	}
	if ok, err := tx.CompareAndSwap(ctx, "k", []byte("claim"), []byte("done"), time.Minute); !ok || err != nil {
		t.Fatalf("swap = %v, %v; want true", ok, err)
	}
	if e, _ := base.Get(ctx, "k"); string(e.Value) != "claim" || tx.Pending() != 1 {
		t.Fatalf("before Commit the base holds %q with %d pending; want the claim and 1", e.Value, tx.Pending())
	}
	tx.Commit()
	if e, _ := base.Get(ctx, "k"); string(e.Value) != "done" || tx.Pending() != 0 {
		t.Fatalf("after Commit the base holds %q with %d pending; want done and 0", e.Value, tx.Pending())
	}
}
