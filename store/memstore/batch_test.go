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
