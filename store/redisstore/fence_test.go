package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/storetest/fencetest"
)

// testFence races takeovers of one key, from goroutines and from a child
// process stopped past its lease (see fencetest), on stores that url
// names, given a key prefix. The child opens the same URL (TestMain wires
// fencetest.Child).
func testFence(t *testing.T, url func(prefix string) string) {
	open := func(t *testing.T, u string) store.Store {
		s, err := store.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.(store.Closer).Close() })
		return s
	}
	t.Run("Race", func(t *testing.T) {
		fencetest.Run(t, func(t *testing.T) store.Store { return open(t, url(freshPrefix())) })
	})
	t.Run("Process", func(t *testing.T) {
		u := url(freshPrefix())
		fencetest.RunProcess(t, open(t, u), u)
	})
}

func TestFenceStandalone(t *testing.T) {
	addr := redistest.Start(t).Addr()
	testFence(t, func(prefix string) string { return "redis://" + addr + "?prefix=" + prefix })
}

func TestFenceSentinel(t *testing.T) {
	st := redistest.StartSentinel(t)
	testFence(t, func(prefix string) string { return st.URL("prefix=" + prefix) })
}

// fenceCluster is TestCluster's fencing case, on its shared cluster.
func fenceCluster(t *testing.T, cl *redistest.Cluster) {
	testFence(t, func(prefix string) string {
		return "redis+cluster://" + strings.Join(cl.Addrs(), ",") + "?prefix=" + prefix
	})
}
