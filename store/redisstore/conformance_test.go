package redisstore_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

func TestConformanceStandalone(t *testing.T) {
	client := redistest.Start(t).Client(t)
	forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) {
		storetest.Run(t, func(t *testing.T) store.Store {
			s := newStore(t, client)
			use(s)
			return s
		})
	})
}

// TestConformanceWaitReplicas runs the conformance suite, races included,
// with WithWaitReplicas over a primary and its replica: every operation
// then goes its own way (SetNX and SetNXBatch item by item as the script,
// SetNXValue, CompareAndSwap, CompareAndDelete and Consume each followed
// by WAIT in one pipeline).
func TestConformanceWaitReplicas(t *testing.T) {
	primary, _ := redistest.StartReplicated(t)
	client := primary.Client(t)
	forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) {
		storetest.Run(t, func(t *testing.T) store.Store {
			s := newStore(t, client, redisstore.WithWaitReplicas(1, time.Second))
			use(s)
			return s
		})
	})
}

// TestCluster runs the cluster variants of the package's tests on one
// shared 3-master cluster; each subtest uses its own key namespace.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	client := cl.Client(t)
	t.Run("Conformance", func(t *testing.T) {
		forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) {
			storetest.Run(t, func(t *testing.T) store.Store {
				s := newStore(t, client)
				use(s)
				return s
			})
		})
	})
	t.Run("RaceMixed", func(t *testing.T) {
		forEachDialect(t, func(t *testing.T, use func(*redisstore.Store)) { raceMixed(t, client, use) })
	})
	t.Run("Fence", func(t *testing.T) { fenceCluster(t, cl) })
	t.Run("OneRoundTrip", func(t *testing.T) { oneRoundTripCluster(t, cl) })
	t.Run("WaitReplicas", func(t *testing.T) { waitReplicasCluster(t, client) })
	t.Run("CheckEvictionPolicy", func(t *testing.T) { checkEvictionPolicyCluster(t, cl) })
	// Last: they move slots.
	t.Run("WaitAfterSlotMoved", func(t *testing.T) { waitAfterSlotMoved(t, cl) })
	t.Run("TxAfterSlotMoved", func(t *testing.T) { txAfterSlotMoved(t, cl) })
}
