package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// An item too large for its shard fails the batch, and the batch's own
// earlier inserts are undone: nothing of it is left.
func TestSetNXBatchTooLargeWritesNothing(t *testing.T) {
	s, err := memstore.New(memstore.WithMaxBytes(64<<10), memstore.WithShards(1), memstore.WithCapacity(100))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	items := []store.BatchItem{
		{Key: "small", Value: []byte("v"), TTL: time.Minute},
		{Key: "huge", Value: make([]byte, 128<<10), TTL: time.Minute},
	}
	if _, err := s.SetNXBatch(ctx, items); !errors.Is(err, memstore.ErrTooLarge) {
		t.Fatalf("SetNXBatch = %v, want ErrTooLarge", err)
	}
	if _, err := s.Get(ctx, "small"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(small) after the failed batch = %v, want not found", err)
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after a failed batch, want 0", s.Len())
	}
}

// A batch larger than its shard's room evicts its own earlier claims; a
// key named again later in the batch must still be claimed by its first
// occurrence only (the engine admits every item reported Set, so a
// duplicate message would run twice), and reported as existing with the
// first occurrence's value.
func TestSetNXBatchDuplicateOfAClaimTheBatchEvictedIsNotSetAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []memstore.Option
	}{
		{"capacity", []memstore.Option{memstore.WithShards(1), memstore.WithCapacity(2)}},
		{"scope quota", []memstore.Option{memstore.WithShards(1), memstore.WithCapacity(100),
			memstore.WithScopeQuota(2, func(string) string { return "tenant" })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := memstore.New(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			items := []store.BatchItem{
				{Key: "a", Value: []byte("1"), TTL: time.Minute},
				{Key: "b", Value: []byte("2"), TTL: time.Minute},
				{Key: "c", Value: []byte("3"), TTL: time.Minute},
				{Key: "a", Value: []byte("4"), TTL: time.Hour},
			}
			res, err := s.SetNXBatch(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			if !res[0].Set {
				t.Fatalf("item 0 (first a) not set: %+v", res[0])
			}
			if res[3].Set {
				t.Fatalf("item 3 (a again) was set too: the batch claimed a twice")
			}
			if string(res[3].Existing.Value) != "1" || res[3].Existing.TTL <= 0 || res[3].Existing.TTL > time.Minute {
				t.Fatalf("item 3 (a again) existing = %q, %v; want the first occurrence's %q, <= 1m", res[3].Existing.Value, res[3].Existing.TTL, "1")
			}
		})
	}
}
