package boltstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest/fencetest"
)

// TestFenceRace races takeovers of one key and checks the fencing tokens
// (see fencetest). It has no cross-process case: bbolt locks its file for
// the one process that opened it, and a second process cannot open it
// until the first closes it (ErrLocked after WithOpenTimeout).
func TestFenceRace(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openStore(t)
		return s
	})
}
