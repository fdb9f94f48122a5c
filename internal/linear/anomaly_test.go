package linear_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// expectIllegal records up to n histories of s under f and fails t unless
// one is not linearizable: the anomaly the case documents must be found.
func expectIllegal(t *testing.T, name string, s store.Store, f fault, n int) {
	p := planFor(t)
	for h := range n {
		w := p.work
		w.Prefix = fmt.Sprintf("anomaly:%s:%s:%d:", runID, f.name, h)
		w.Seed = rand.Uint64()
		var ops []porcupine.Operation
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			ops, _, err = linear.Run(s, w)
		}()
		injected := nemesis(t, f, done)
		if err != nil {
			t.Fatalf("history %d: %v", h, err)
		}
		res, path, err := linear.Check(ops, fmt.Sprintf("%s-%d", name, h))
		if err != nil {
			t.Fatal(err)
		}
		if res == porcupine.Illegal {
			t.Logf("RESULT store=%s fault=%s histories=%d linearizable=false (as expected; %d faults in the last)", name, f.name, h+1, injected)
			_ = os.RemoveAll(filepath.Dir(path))
			return
		}
	}
	t.Errorf("%s under %s: %d histories linearizable, want the anomaly found", name, f.name, n)
}

// TestRedisWithoutPersistenceLosesWrites: a Redis that keeps nothing on
// disk forgets every acknowledged write when it restarts, and the checker
// must say so.
func TestRedisWithoutPersistenceLosesWrites(t *testing.T) {
	srv := redistest.Start(t) // --appendonly no, --save ""
	s := newRedisStore(t, srv.Addr())
	restart := fault{
		name:   "restart",
		inject: func(*testing.T) { srv.Stop() },
		heal:   func(*testing.T) { srv.Restart() },
	}
	expectIllegal(t, "redisstore-no-persistence", s, restart, 5)
}

// TestRedisRetriesMisreportWrites: with go-redis's default MaxRetries (3),
// a write whose reply is lost is sent again, and the second attempt
// reports on the first one's effect (a SetNX finds its own value, a
// Consume finds nothing): redisstore's documentation warns of it, and
// redisstore.OpenURL sets MaxRetries to -1. The checker must find it.
func TestRedisRetriesMisreportWrites(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	srv := redistest.Start(t)
	p := newProxy(t, srv.Addr())
	opts := redisOptions(p.Addr())
	opts.MaxRetries = 0 // go-redis's default: 3 retries
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	// About one history in three finds it (6 runs needed 2, 5, 3, 2, 4
	// and 3); 25 miss it together about once in 100,000 runs.
	for _, f := range proxyFaults(p) {
		if f.name == "lost-replies" {
			expectIllegal(t, "redisstore-retries", s, f, 25)
		}
	}
}
