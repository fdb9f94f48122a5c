package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// failoverRounds is how many times TestFailoverLoss kills the primary.
const failoverRounds = 5

// TestFailoverLoss kills the primary of a Sentinel set-up under load,
// failoverRounds times, and counts the claims that were acknowledged (a
// SetNX that returned set == true and no error) but are missing after the
// replica took over: through a store without WAIT and through one with
// wait_replicas=1, writing side by side. In every other round the
// replication link is cut (see cutReplicationLink) just before the kill, so that writes the replica never saw are acknowledged without
// WAIT. With WAIT none may be lost. The clients live across the rounds and
// must keep writing to the current primary (a dialer that kept polling a
// dead primary's address once left a client on it, answering READONLY,
// after it came back as a replica). The counts are logged: go test -v
// -run TestFailoverLoss.
func TestFailoverLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("fails over a Sentinel set-up several times")
	}
	st := redistest.StartSentinel(t)
	// Long-lived clients, as in a service: each must follow every
	// failover to the current primary.
	stores := []*redisstore.URLStore{
		openFailoverStore(t, st.URL("prefix=plain:")),
		openFailoverStore(t, st.URL("prefix=wait:&wait_replicas=1&wait_timeout=100ms")),
	}
	var acked, lost [2]int
	for round := range failoverRounds {
		a, l, duringCut := failoverRound(t, st, stores, round, round%2 == 0)
		if round%2 == 0 && duringCut == 0 {
			t.Errorf("round %d: no claim acknowledged without WAIT while the link was cut: the client is not writing to the primary", round)
		}
		for i := range stores {
			acked[i] += a[i]
			lost[i] += l[i]
		}
		t.Logf("round %d (link cut: %v): without WAIT %d of %d acknowledged claims lost; with WAIT %d of %d",
			round, round%2 == 0, l[0], a[0], l[1], a[1])
	}
	t.Logf("total over %d failovers: without WAIT %d of %d acknowledged claims lost; with WAIT %d of %d",
		failoverRounds, lost[0], acked[0], lost[1], acked[1])
	if lost[1] != 0 {
		t.Errorf("with wait_replicas=1, %d acknowledged claims were lost in failovers", lost[1])
	}
	if lost[0] == 0 {
		t.Errorf("without WAIT no acknowledged claim was lost, although the link was cut before the kill: the test no longer measures loss")
	}
	if acked[1] == 0 {
		t.Errorf("no claim was acknowledged with WAIT")
	}
}

func openFailoverStore(t *testing.T, rawURL string) *redisstore.URLStore {
	t.Helper()
	s, err := redisstore.OpenURL(context.Background(), rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// failoverRound writes through every store while it kills the primary
// (cutting the replication link first when cut is set), waits for the
// sentinels to promote the replica, and returns per store the claims
// acknowledged and the acknowledged claims missing afterwards, and how
// many claims the store without WAIT had acknowledged while the link was
// cut. It brings the old primary back as a replica of the new one.
func failoverRound(t *testing.T, st *redistest.Sentinel, stores []*redisstore.URLStore, round int, cut bool) (acked, lost [2]int, duringCut int) {
	t.Helper()
	primary, replica := st.Primary, st.Replica
	if st.MasterAddr() == replica.Addr() {
		primary, replica = replica, primary
	}
	redistest.WaitReplicaUp(t, primary, replica)

	stop := make(chan struct{})
	keys := make([][]string, len(stores))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, s := range stores {
		for g := range 4 {
			wg.Go(func() {
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("r%d:g%d:%d", round, g, n)
					ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
					set, _, err := s.SetNX(ctx, key, []byte("claim"), time.Hour)
					cancel()
					if err == nil && set {
						mu.Lock()
						keys[i] = append(keys[i], key)
						mu.Unlock()
					} else if err != nil {
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}
	time.Sleep(150 * time.Millisecond)
	if cut {
		mu.Lock()
		before := len(keys[0])
		mu.Unlock()
		cutReplicationLink(t, primary)
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		duringCut = len(keys[0]) - before
		mu.Unlock()
	}
	primary.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for st.MasterAddr() != replica.Addr() {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("round %d: no failover to %s after 20s", round, replica.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // writes reach the new primary
	close(stop)
	wg.Wait()
	for _, s := range stores {
		waitFollowed(t, s, round)
	}

	for i, s := range stores {
		acked[i] = len(keys[i])
		lost[i] = countMissing(t, s, keys[i])
	}
	primary.Restart() // empty; the sentinels make it a replica of the new primary
	return acked, lost, duringCut
}

// waitFollowed waits until s reaches the new primary (a read of a missing
// key answers "not found"): a client learns of the failover from the
// sentinels on its own schedule, and until then reads fail (connection
// refused) rather than miss. Following takes well
// under a second; 20 seconds without it fails the test.
func waitFollowed(t *testing.T, s store.Store, round int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := s.Get(ctx, fmt.Sprintf("r%d:probe", round))
		cancel()
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("round %d: the client did not follow the failover within 20s: %v", round, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cutReplicationLink closes primary's link to its replica and keeps the
// replica from reconnecting (it would resynchronise within milliseconds):
// the primary now requires a password the replica does not have.
// Connections already open, the writers' among them, stay authenticated.
func cutReplicationLink(t *testing.T, primary *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	c := primary.Client(t)
	if err := c.ConfigSet(ctx, "requirepass", "link-cut").Err(); err != nil {
		t.Fatalf("cutting the replication link: %v", err)
	}
	if err := c.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		t.Fatalf("cutting the replication link: %v", err)
	}
}

// countMissing returns how many of keys s no longer holds.
func countMissing(t *testing.T, s store.Store, keys []string) int {
	t.Helper()
	missing := 0
	for _, k := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.Get(ctx, k)
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			missing++
		case err != nil:
			t.Fatalf("reading %s back after the failover: %v", k, err)
		}
	}
	return missing
}
