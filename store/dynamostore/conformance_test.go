package dynamostore_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest"
)

// TestConformance runs the store contract's suite, each case on a fresh
// table. The batch cases skip: the store is not a store.Batcher (see the
// package documentation).
func TestConformance(t *testing.T) {
	needDynalite(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t)
		return s
	})
}
