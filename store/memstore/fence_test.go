package memstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest/fencetest"
)

// TestFenceRace races takeovers of one key and checks the fencing tokens
// (see fencetest). A memory store lives in one process, so it has no
// cross-process case.
func TestFenceRace(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}
