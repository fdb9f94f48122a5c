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
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestRedisClusterFailover records histories of the store on a Redis
// Cluster (3 masters) whose keys share one slot (a hash tag), while the
// replica of that slot's master takes the slot over with CLUSTER
// FAILOVER 300ms into each history: a manual failover, in which the
// master stops its clients until the replica has every write, then hands
// the slot over. The client (a ClusterClient, no retries) follows the
// MOVED answers to the new owner. Each history must be linearizable. The
// next history fails back.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel() // its own servers
	p := planFor(t)
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
	owner := m.Options().Addr
	other := redistest.Start(t, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"))
	joinAsReplica(t, cl, other, owner)

	s, err := redisstore.New(cc, redisstore.WithPrefix("cfo:"))
	if err != nil {
		t.Fatal(err)
	}
	w := p.work
	w.MaxOps, w.Duration = 1<<20, time.Minute // the failover stops it
	start := time.Now()
	var total linear.Stats
	histories := 0
	replica := other.Addr()
	var last time.Time // the last failover
	for h := 0; h < 1 || (p.budget > 0 && time.Since(start) < p.budget); h++ {
		w.Prefix = fmt.Sprintf("%sh%d:", tag, h) // one slot
		w.Seed = rand.Uint64()
		waitLinkUp(t, replica)
		// A master votes for a replica of a given master at most once in
		// twice the node timeout (5s), and a failover needs the votes.
		time.Sleep(time.Until(last.Add(11 * time.Second)))
		var ops []porcupine.Operation
		var stats linear.Stats
		var rerr error
		done, stop := make(chan struct{}), make(chan struct{})
		w.Stop = stop
		go func() {
			defer close(done)
			ops, stats, rerr = linear.Run(s, w)
		}()
		took := clusterFailover(t, replica, stop, done)
		last = time.Now()

		if rerr != nil {
			t.Errorf("history %d: %v", h, rerr)
		}
		linear.CheckT(t, ops, fmt.Sprintf("cluster-failover-%d", h))
		t.Logf("history %d: %d operations, slot taken over by %s in %v", h, len(ops), replica, took.Round(time.Millisecond))
		histories++
		total.Add(stats)
		replica, owner = owner, replica
	}
	t.Logf("RESULT store=redisstore-cluster fault=cluster-failover histories=%d failovers=%d ops=%d unknown=%d notsent=%d linearizable=%v time=%v",
		histories, histories, total.Ops, total.Unknown, total.NotSent, !t.Failed(), time.Since(start).Round(time.Millisecond))
	for _, e := range total.Errors {
		t.Logf("unknown outcome, e.g.: %s", e)
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

// clusterFailover sends CLUSTER FAILOVER to the replica at addr 300ms
// into a history, waits until it is a master, lets the clients go on for
// 1.5s, then closes stop and waits for the history to end (done). It
// returns the time from the command to the replica's promotion.
func clusterFailover(t *testing.T, addr string, stop chan<- struct{}, done <-chan struct{}) time.Duration {
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
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	if err := c.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER: %v", err)
	}
	poll(t, ctx, addr+" to be promoted", func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:master") {
			return fmt.Errorf("still a replica")
		}
		return nil
	})
	took := time.Since(began)
	time.Sleep(1500 * time.Millisecond) // the clients go on with the new owner
	close(stop)
	<-done
	return took
}
