package linear_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store/redisstore"
)

func init() {
	// go-redis logs every refused dial while a failover is under way;
	// the history says what matters.
	redis.SetLogger(discardLogger{})
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// failoverVariant is one way of running the store through a Sentinel
// failover: with or without WAIT (redisstore.WithWaitReplicas through the
// URL's wait_replicas), and with or without the replication link cut just
// before the primary is killed.
type failoverVariant struct {
	name string
	wait bool
	cut  bool
}

// TestRedisSentinelFailover records histories of the store on a Sentinel
// set-up (a primary, one replica, three sentinels) while the primary is
// killed (SIGKILL) and the sentinels promote the replica, and checks each
// against the model. Without WAIT a write the replica has not received
// when the primary dies is lost although it was acknowledged: the history
// may not be linearizable, and the case logs what it found and keeps the
// visualization. With WAIT every acknowledged write reached the replica;
// the case fails when such a history is not linearizable. With cut set,
// the replication link is cut 100ms before the kill (the primary requires
// a password the replica lacks), so that the last writes certainly reach
// only the primary. The short version runs one failover per store with
// the link cut; the long version runs each store, cut or not, for the
// time IDEMKIT_LINEAR_LONG names, then the engine model through failovers
// with the link cut (runEngineFailoverCase).
func TestRedisSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	variants := []failoverVariant{{"plain-cut", false, true}, {"wait-cut", true, true}}
	p := planFor(t)
	if p.budget > 0 {
		variants = append(variants, failoverVariant{"plain", false, false}, failoverVariant{"wait", true, false})
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { runFailoverCase(t, st, v, p) })
	}
	t.Run("wait-read", func(t *testing.T) { runWaitReadCase(t, st) })
	if p.budget > 0 {
		for _, v := range []failoverVariant{{"engine-plain-cut", false, true}, {"engine-wait-cut", true, true}} {
			t.Run(v.name, func(t *testing.T) { runEngineFailoverCase(t, st, v, p) })
		}
	}
}

// runEngineFailoverCase records histories of the engine's claims (see
// runEngineCase) over the store on st while the primary fails over, and
// checks each against linear.EngineModel. It logs what it finds and keeps
// the visualizations; it does not fail on a history that is not
// linearizable, with or without WAIT: with WAIT a Begin may still read a
// record whose write was not confirmed (a completion that returned an
// error) and the failover loses it. Long version only.
func runEngineFailoverCase(t *testing.T, st *redistest.Sentinel, v failoverVariant, p plan) {
	query := fmt.Sprintf("prefix=efo:%s:%s:", runID, v.name)
	if v.wait {
		query += "&wait_replicas=1&wait_timeout=100ms"
	}
	s, err := redisstore.OpenURL(context.Background(), st.URL(query))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	w := engineWork
	w.Duration, w.Clients, w.Keys = time.Minute, 8, 3 // failover stops it
	start := time.Now()
	var total linear.EngineStats
	histories, illegal, reclaimed := 0, 0, 0
	for h := 0; time.Since(start) < p.budget; h++ {
		w.Prefix = fmt.Sprintf("h%d:", h)
		w.Seed = rand.Uint64()
		var ops []porcupine.Operation
		var stats linear.EngineStats
		var rerr error
		done, stop := make(chan struct{}), make(chan struct{})
		w.Stop = stop
		t0 := time.Now() // at or just before the history's start
		go func() {
			defer close(done)
			ops, stats, rerr = linear.RunEngine(s, w)
		}()
		fo := failover(t, st, v.cut, stop, done)
		t.Logf("history %d: %d observations, failover in %v", h, len(ops), fo.took.Round(time.Millisecond))
		if rerr != nil {
			t.Errorf("history %d: %v", h, rerr)
		}
		res, path, err := linear.CheckModel(linear.EngineModel, ops, fmt.Sprintf("sentinel-%s-%d", v.name, h))
		switch {
		case err != nil:
			t.Fatal(err)
		case res == porcupine.Unknown:
			t.Errorf("history %d: the checker did not finish within %v", h, linear.CheckTimeout)
		case res == porcupine.Illegal:
			illegal++
			t.Logf("history %d: not linearizable; visualization: %s", h, path)
			explainIllegal(t, linear.EngineModel, ops, fo, t0)
		}
		again := claimedAgain(ops)
		reclaimed += again
		t.Logf("history %d: %d keys claimed again after a result was acknowledged or replayed", h, again)
		histories++
		total.Add(stats)
	}
	t.Logf("RESULT engine store=redisstore-sentinel variant=%s histories=%d ops=%d admitted=%d completed=%d leaselost=%d replayed=%d unknown=%d notsent=%d reclaimed=%d illegal=%d time=%v",
		v.name, histories, total.Ops, total.Admitted, total.Completed, total.Lost, total.Replayed, total.Unknown, total.NotSent, reclaimed, illegal, time.Since(start).Round(time.Millisecond))
}

func runFailoverCase(t *testing.T, st *redistest.Sentinel, v failoverVariant, p plan) {
	query := fmt.Sprintf("prefix=fo:%s:%s:", runID, v.name)
	if v.wait {
		query += "&wait_replicas=1&wait_timeout=100ms"
	}
	s, err := redisstore.OpenURL(context.Background(), st.URL(query))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	w := p.work
	w.MaxOps, w.Duration = 1<<20, time.Minute // failover stops it
	start := time.Now()
	var total linear.Stats
	histories, illegal, lostWrites, dirty := 0, 0, 0, 0
	var paths []string
	for h := 0; h < 1 || (p.budget > 0 && time.Since(start) < p.budget); h++ {
		w.Prefix = fmt.Sprintf("h%d:", h)
		w.Seed = rand.Uint64()
		var ops []porcupine.Operation
		var stats linear.Stats
		var rerr error
		done, stop := make(chan struct{}), make(chan struct{})
		w.Stop = stop
		t0 := time.Now() // at or just before the history's start
		go func() {
			defer close(done)
			ops, stats, rerr = linear.Run(s, w)
		}()
		fo := failover(t, st, v.cut, stop, done)
		if v.cut {
			n := ackedWrites(ops, fo.cut.Sub(t0), fo.killed.Sub(t0)-time.Millisecond)
			lostWrites += n
			t.Logf("history %d: %d writes acknowledged while the link was cut, before the kill: lost", h, n)
		}
		if rerr != nil {
			t.Errorf("history %d: %v", h, rerr)
		}
		name := fmt.Sprintf("sentinel-%s-%d", v.name, h)
		checked := time.Now()
		res, path, err := linear.Check(ops, name)
		t.Logf("history %d: %d operations, failover in %v, checked in %v: %v", h, len(ops), fo.took.Round(time.Millisecond), time.Since(checked).Round(time.Millisecond), res)
		switch {
		case err != nil:
			t.Fatal(err)
		case res == porcupine.Unknown:
			t.Errorf("%s: the checker did not finish within %v (%d operations)", name, linear.CheckTimeout, len(ops))
		case res == porcupine.Illegal:
			illegal++
			paths = append(paths, path)
			explainIllegal(t, linear.Model, ops, fo, t0)
			if v.wait {
				// WAIT confirms writes, not reads: an answer the old primary
				// gave during the cut can reflect a write whose WAIT failed
				// (ErrNotReplicated, an unknown outcome) and that the
				// failover lost (runWaitReadCase). That, and only that, is
				// allowed: without those answers the history must be
				// linearizable.
				from, to := fo.cut.Sub(t0)-100*time.Millisecond, fo.killed.Sub(t0)
				if fo.cut.IsZero() {
					from = to - 200*time.Millisecond // a replica's lag at the kill
				}
				if r, _, err := linear.Check(withoutReads(ops, from, to), name+"-without-reads"); err != nil || r != porcupine.Ok {
					t.Errorf("%s: with WAIT, a history of %d operations is NOT linearizable, even without the answers that changed nothing given before the kill (%v); visualization: %s", name, len(ops), r, path)
				} else {
					dirty++
					t.Logf("%s: with WAIT, a history of %d operations is NOT linearizable, but is once the answers that changed nothing given before the kill are left out: they read writes WAIT did not confirm, lost in the failover; visualization: %s", name, len(ops), path)
				}
			}
		}
		histories++
		total.Add(stats)
	}
	t.Logf("RESULT store=redisstore-sentinel variant=%s histories=%d failovers=%d ops=%d unknown=%d notsent=%d lostwrites=%d illegal=%d dirtyreads=%d time=%v",
		v.name, histories, histories, total.Ops, total.Unknown, total.NotSent, lostWrites, illegal, dirty, time.Since(start).Round(time.Millisecond))
	for _, e := range total.Errors {
		t.Logf("unknown outcome, e.g.: %s", e)
	}
	if v.cut && !v.wait && lostWrites == 0 {
		t.Errorf("no write was acknowledged while the link was cut: the case measured nothing")
	}
	for _, path := range paths {
		t.Logf("not linearizable; visualization: %s", path)
	}
}

// failover kills the current primary of st 300ms into a history (cutting
// its replication link 100ms before when cut is set), waits until the
// sentinels agree on the replica as the primary and the failover has
// ended, brings the old primary back (empty) as a replica of the new one,
// lets the clients go on for 1.5s, then closes stop and waits for the
// history to end (done) and the new replica to be in sync. It returns when
// it cut the link and killed the primary, and the time from the kill to
// the sentinels' agreement.
func failover(t *testing.T, st *redistest.Sentinel, cut bool, stop chan<- struct{}, done <-chan struct{}) failoverTimes {
	t.Helper()
	end := sync.OnceFunc(func() { close(stop) })
	defer end() // also when the test fails
	primary, replica := st.Primary, st.Replica
	if agreedMaster(t, st, "") == replica.Addr() {
		primary, replica = replica, primary
	}
	if pause(200*time.Millisecond, done) {
		t.Fatal("the history ended before the failover")
	}
	var fo failoverTimes
	if cut {
		cutLink(t, primary)
		fo.cut = time.Now()                // no write called from now on reaches the replica
		time.Sleep(100 * time.Millisecond) // writes that only the primary gets
	}
	fo.killed, fo.took = killPrimary(t, st, primary, replica)
	time.Sleep(1500 * time.Millisecond) // the clients go on with the new primary
	end()
	<-done
	redistest.WaitReplicaUp(t, replica, primary)
	return fo
}

// explainIllegal logs, for each key whose own history is not
// linearizable, its operations with times relative to the cut (or the
// kill, when the link was not cut); t0 is the history's start.
func explainIllegal(t *testing.T, m porcupine.Model, ops []porcupine.Operation, fo failoverTimes, t0 time.Time) {
	t.Helper()
	origin, mark := fo.killed, "kill"
	if !fo.cut.IsZero() {
		origin, mark = fo.cut, "cut"
	}
	for _, key := range linear.IllegalKeys(m, ops) {
		t.Logf("key %s is not linearizable; its operations, ms from the %s (the kill at %+.1fms; unknown outcomes end with the history):\n%s",
			key, mark, float64(fo.killed.Sub(origin))/1e6, linear.Describe(m, ops, key, origin.Sub(t0)))
	}
}

// cutLink cuts the replication link of primary: it requires a password
// its replica lacks, and the replica's connection is closed. The clients'
// connections stay authenticated.
func cutLink(t *testing.T, primary *redistest.Server) {
	t.Helper()
	c := primary.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := c.ConfigSet(ctx, "requirepass", "cut-"+randHex(4)).Err()
	if err == nil {
		err = c.ClientKillByFilter(ctx, "TYPE", "replica").Err()
	}
	if err != nil {
		t.Fatalf("cutting the replication link: %v", err)
	}
}

// killPrimary kills primary (SIGKILL), waits until the sentinels of st
// agree on replica as the primary and the failover has ended, and brings
// the old primary back, empty, as a replica of the new one, so that
// writes with WAIT can be confirmed again (the sentinels would make it one
// within about ten seconds). It returns when it killed the primary and
// the time from the kill to the sentinels' agreement.
func killPrimary(t *testing.T, st *redistest.Sentinel, primary, replica *redistest.Server) (time.Time, time.Duration) {
	t.Helper()
	primary.Stop()
	killed := time.Now()
	agreedMaster(t, st, replica.Addr())
	took := time.Since(killed)
	failoverEnded(t, st)
	primary.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := primary.Client(t).ReplicaOf(ctx, "127.0.0.1", fmt.Sprint(replica.Port())).Err(); err != nil {
		t.Fatalf("making the old primary a replica: %v", err)
	}
	return killed, took
}

// claimedAgain counts the keys of an engine history admitted to a claim
// that began after a Complete of the key had returned success or a Begin
// had replayed its result: the result was lost.
func claimedAgain(ops []porcupine.Operation) int {
	settled := map[string]int64{} // the earliest return of a success or replay
	for _, op := range ops {
		in, out := op.Input.(linear.ClaimInput), op.Output.(linear.ClaimOutput)
		if in.Kind == linear.Replay || (in.Kind == linear.Complete && out.OK) {
			if r, ok := settled[in.Key]; !ok || op.Return < r {
				settled[in.Key] = op.Return
			}
		}
	}
	again := map[string]bool{}
	for _, op := range ops {
		in := op.Input.(linear.ClaimInput)
		if r, ok := settled[in.Key]; ok && in.Kind == linear.Admit && op.Call > r {
			again[in.Key] = true
		}
	}
	return len(again)
}

// agreedMaster waits until every sentinel of st reports the same
// primary, want unless it is "", and returns its address, failing the
// test after 20 seconds. (One sentinel may still report the old primary
// for a moment after another reports the new one.)
func agreedMaster(t *testing.T, st *redistest.Sentinel, want string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		addrs := map[string]bool{}
		for _, sn := range st.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr()})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			addr, err := c.GetMasterAddrByName(ctx, redistest.SentinelMaster).Result()
			cancel()
			_ = c.Close()
			if err != nil || len(addr) != 2 {
				addrs["?"] = true
				continue
			}
			addrs[addr[0]+":"+addr[1]] = true
		}
		if len(addrs) == 1 && !addrs["?"] {
			for a := range addrs {
				if want == "" || a == want {
					return a
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sentinels do not agree on a primary (want %q) after 20s: %v", want, addrs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failoverEnded waits until no sentinel of st has a failover of the
// primary under way (its flags are "master" alone), failing the test
// after 20 seconds. A server restarted while one is under way may be
// promoted again by it.
func failoverEnded(t *testing.T, st *redistest.Sentinel) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		busy := ""
		for _, sn := range st.Sentinels {
			c := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr()})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			m, err := c.Master(ctx, redistest.SentinelMaster).Result()
			cancel()
			_ = c.Close()
			switch {
			case err != nil:
				busy = err.Error()
			case m["flags"] != "master":
				busy = sn.Addr() + ": " + m["flags"]
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a failover is still under way after 20s (%s)", busy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failoverTimes is when failover cut the replication link (zero: it did
// not) and killed the primary, and how long the sentinels took to report
// the replica as the primary.
type failoverTimes struct {
	cut, killed time.Time
	took        time.Duration
}

// withoutReads returns ops without the definite answers that did not
// change the key (a Get, a SetNX that found the key taken, a compare that
// failed, a Consume that found nothing) returned at or after from and
// called by to (offsets from the history's start).
func withoutReads(ops []porcupine.Operation, from, to time.Duration) []porcupine.Operation {
	var kept []porcupine.Operation
	for _, op := range ops {
		in, out := op.Input.(linear.Input), op.Output.(linear.Output)
		read := !out.Unknown && (in.Kind == linear.Get || !out.OK)
		if read && op.Return >= int64(from) && op.Call <= int64(to) {
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

// ackedWrites counts the operations of a history that changed the key
// and were acknowledged, called at or after from and answered by to
// (offsets from the history's start).
func ackedWrites(ops []porcupine.Operation, from, to time.Duration) int {
	n := 0
	for _, op := range ops {
		in, out := op.Input.(linear.Input), op.Output.(linear.Output)
		if out.Unknown || !out.OK || in.Kind == linear.Get || op.Call < int64(from) || op.Return > int64(to) {
			continue
		}
		n++
	}
	return n
}
