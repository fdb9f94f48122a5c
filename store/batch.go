package store

import (
	"context"
	"fmt"
	"time"
)

// BatchItem is one claim of a batch: the arguments of one SetNX.
type BatchItem struct {
	Key   string
	Value []byte
	TTL   time.Duration
}

// BatchResult is the outcome of one BatchItem, as SetNX would report it.
type BatchResult struct {
	// Set reports that the item's value was stored.
	Set bool
	// Existing is the value held and its remaining TTL when Set is false.
	Existing Entry
}

// Batcher is implemented by stores that can claim many keys in one call
// (one critical section, one transaction, one round trip). It is found by
// type assertion, like Closer and Pinger.
//
// SetNXBatch applies SetNX to every item atomically per key and returns the
// results in input order. A key that appears more than once is claimed by
// its first occurrence; later occurrences report it as existing. Arguments
// are checked first (CheckBatch): one invalid item fails the whole batch
// with ErrInvalid and nothing is written. A batch need not be atomic as a
// whole, but every item is, and the results report what happened to each.
// When SetNXBatch returns another error, any item may have been set (a
// store that claims a batch in several statements may have committed some
// of them): undo the claims the caller cannot account for, as the engine
// does with CompareAndDelete of its own values.
type Batcher interface {
	SetNXBatch(ctx context.Context, items []BatchItem) ([]BatchResult, error)
}

// CheckBatch validates every item of a batch with CheckSet and names the
// first invalid item's position.
func CheckBatch(items []BatchItem) error {
	for i, it := range items {
		if err := CheckSet(it.Key, it.Value, it.TTL); err != nil {
			return fmt.Errorf("batch item %d: %w", i, err)
		}
	}
	return nil
}
