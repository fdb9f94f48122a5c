package linear_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestRedisClusterFailover records histories of the store on a Redis
// Cluster (3 masters) whose keys share one slot (a hash tag), while the
// replica of that slot's master takes the slot over 300ms into each
// history, and the next history fails back. In "manual" the replica is
// sent CLUSTER FAILOVER: the master stops its clients until the replica
// has every write, then hands the slot over; each history must be
// linearizable. In "takeover-cut" the replication link is cut 100ms
// before the replica is sent CLUSTER FAILOVER TAKEOVER, which asks no one:
// the writes acknowledged in those 100ms are lost, as in the Sentinel
// case without WAIT; the case logs their count and the verdict, and fails
// only if no write was acknowledged during the cut. The client (a
// ClusterClient, no retries) follows the MOVED answers to the new owner.
// The short version runs one failover of each.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel() // its own servers
	cl := redistest.StartCluster(t, 3)
	opts := cl.Options()
	opts.MaxRetries = -1 // a retried write may have happened
	opts.ContextTimeoutEnabled = true
	cc := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = cc.Close() })
	tag := "{lin" + runID + "}:"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := cc.MasterForKey(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	pair := &slotPair{owner: m.Options().Addr}
	other := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
	joinAsReplica(t, cl, other, pair.owner)
	pair.replica = other.Addr()
	s, err := redisstore.New(cc, redisstore.WithPrefix("cfo:"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("manual", func(t *testing.T) { runClusterCase(t, s, tag, pair, false) })
	t.Run("takeover-cut", func(t *testing.T) { runClusterCase(t, s, tag, pair, true) })
}

// slotPair is the slot's current owner and its replica.
type slotPair struct {
	owner, replica string
	last           time.Time // the last manual failover
}

func runClusterCase(t *testing.T, s store.Store, tag string, pair *slotPair, takeover bool) {
	p := planFor(t)
	w := p.work
	w.MaxOps, w.Duration = 1<<20, time.Minute // the failover stops it
	start := time.Now()
	var total linear.Stats
	histories, illegal, lost := 0, 0, 0
	name := "manual"
	if takeover {
		name = "takeover-cut"
	}
	for h := 0; h < 1 || (p.budget > 0 && time.Since(start) < p.budget); h++ {
		w.Prefix = fmt.Sprintf("%s%s:h%d:", tag, name, h) // one slot
		w.Seed = rand.Uint64()
		waitLinkUp(t, pair.replica)
		if !takeover {
			// A master votes for a replica of a given master at most once
			// in twice the node timeout (5s), and a manual failover needs
			// the votes; a takeover asks for none.
			time.Sleep(time.Until(pair.last.Add(11 * time.Second)))
		}
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
		fo := clusterFailover(t, pair, takeover, stop, done)
		if !takeover {
			pair.last = time.Now()
		}
		if rerr != nil {
			t.Errorf("history %d: %v", h, rerr)
		}
		hname := fmt.Sprintf("cluster-%s-%d", name, h)
		if takeover {
			n := ackedWrites(ops, fo.cut.Sub(t0), fo.killed.Sub(t0)-time.Millisecond)
			lost += n
			t.Logf("history %d: %d writes acknowledged while the link was cut, before the takeover: lost", h, n)
			res, path, err := linear.Check(ops, hname)
			switch {
			case err != nil:
				t.Fatal(err)
			case res == porcupine.Unknown:
				t.Errorf("%s: the checker did not finish within %v", hname, linear.CheckTimeout)
			case res == porcupine.Illegal:
				illegal++
				t.Logf("%s: not linearizable; visualization: %s", hname, path)
			}
		} else {
			linear.CheckT(t, ops, hname)
		}
		t.Logf("history %d: %d operations, slot taken over by %s in %v", h, len(ops), pair.replica, fo.took.Round(time.Millisecond))
		histories++
		total.Add(stats)
		pair.owner, pair.replica = pair.replica, pair.owner
	}
	t.Logf("RESULT store=redisstore-cluster fault=%s histories=%d failovers=%d ops=%d unknown=%d notsent=%d lostwrites=%d illegal=%d time=%v",
		name, histories, histories, total.Ops, total.Unknown, total.NotSent, lost, illegal, time.Since(start).Round(time.Millisecond))
	for _, e := range total.Errors {
		t.Logf("unknown outcome, e.g.: %s", e)
	}
	if takeover && lost == 0 {
		t.Errorf("no write was acknowledged while the link was cut: the case measured nothing")
	}
}

// joinAsReplica makes the cluster node n (started with cluster-enabled)
// a replica of the master at owner: CLUSTER MEET, then CLUSTER REPLICATE
// once n knows the master, then waits until its link is up and every
// master knows it as the replica, which a failover needs (the masters
// vote for it).
func joinAsReplica(t *testing.T, cl *redistest.Cluster, n *redistest.Server, owner string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := n.Client(t)
	host, port, _ := net.SplitHostPort(owner)
	if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
		t.Fatalf("CLUSTER MEET: %v", err)
	}
	oc := redis.NewClient(&redis.Options{Addr: owner})
	defer oc.Close()
	ownerID, err := oc.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	myID, err := c.ClusterMyID(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the new node to replicate "+owner, func() error {
		return c.ClusterReplicate(ctx, ownerID).Err()
	})
	waitLinkUp(t, n.Addr())
	for _, addr := range cl.Addrs() {
		mc := redis.NewClient(&redis.Options{Addr: addr})
		poll(t, ctx, addr+" to know the replica", func() error {
			nodes, err := mc.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			for _, line := range strings.Split(nodes, "\n") {
				f := strings.Fields(line)
				if len(f) > 3 && f[0] == myID && strings.Contains(f[2], "slave") && f[3] == ownerID {
					return nil
				}
			}
			return fmt.Errorf("not yet")
		})
		_ = mc.Close()
	}
}

// waitLinkUp waits until the replica at addr has its replication link
// up, which a manual failover needs.
func waitLinkUp(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	poll(t, ctx, addr+"'s replication link", func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("link not up")
		}
		return nil
	})
}

// poll calls f every 50ms until it returns nil, failing t when ctx ends.
func poll(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterFailover has the replica of pair take the slot over 300ms into
// a history: CLUSTER FAILOVER or, with takeover, CLUSTER FAILOVER
// TAKEOVER 100ms after cutting the owner's replication link (the owner
// requires a password its replica lacks, and the replica's connection is
// closed; the password is dropped once the replica is promoted). It waits
// until the replica is a master, lets the clients go on for 1.5s, then
// closes stop and waits for the history to end (done). It returns when it
// cut the link and sent the command (killed), and the time from the
// command to the promotion.
func clusterFailover(t *testing.T, pair *slotPair, takeover bool, stop chan<- struct{}, done <-chan struct{}) failoverTimes {
	t.Helper()
	defer func() {
		select {
		case <-done:
		default:
			close(stop)
			<-done
		}
	}()
	if pause(300*time.Millisecond, done) {
		t.Fatal("the history ended before the failover")
	}
	c := redis.NewClient(&redis.Options{Addr: pair.replica})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var fo failoverTimes
	var oc *redis.Conn
	args := []any{"cluster", "failover"}
	if takeover {
		o := redis.NewClient(&redis.Options{Addr: pair.owner, PoolSize: 1})
		defer o.Close()
		oc = o.Conn() // one connection: it stays authenticated
		defer oc.Close()
		err := oc.ConfigSet(ctx, "requirepass", "cut-"+randHex(4)).Err()
		if err == nil {
			err = oc.ClientKillByFilter(ctx, "TYPE", "replica").Err()
		}
		if err != nil {
			t.Fatalf("cutting the replication link: %v", err)
		}
		fo.cut = time.Now()
		time.Sleep(100 * time.Millisecond) // writes that only the owner gets
		args = append(args, "takeover")
	}
	fo.killed = time.Now()
	if err := c.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	poll(t, ctx, pair.replica+" to be promoted", func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:master") {
			return fmt.Errorf("still a replica")
		}
		return nil
	})
	fo.took = time.Since(fo.killed)
	if oc != nil {
		if err := oc.ConfigSet(ctx, "requirepass", "").Err(); err != nil {
			t.Fatalf("dropping the password: %v", err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the clients go on with the new owner
	close(stop)
	<-done
	return fo
}
