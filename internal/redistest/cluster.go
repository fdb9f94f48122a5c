package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Cluster is a Redis Cluster of masters without replicas, each a Server.
// Its methods are safe for concurrent use.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters redis-server nodes with cluster-enabled,
// joins them with redis-cli --cluster create (no replicas), and waits
// until every node reports cluster_state:ok. Redis needs at least three
// masters. The nodes are killed when the test ends. opts apply to every
// node.
func StartCluster(tb testing.TB, masters int, opts ...Option) *Cluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	cli := lookPath(tb, "redis-cli")
	c, err := newConfig(opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	cl := &Cluster{}
	for range masters {
		cl.nodes = append(cl.nodes, startClusterNode(tb, c.args))
	}
	cl.create(tb, cli)
	cl.waitOK(tb)
	return cl
}

// startClusterNode starts one cluster-enabled node whose bus port
// (port+10000) is free too. Its nodes.conf is in its own directory (the
// server's --dir), fresh for every start attempt.
func startClusterNode(tb testing.TB, extra []string) *Server {
	tb.Helper()
	args := append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000",
	}, extra...)
	return startFresh(tb, freePort, true, args)
}

// create runs redis-cli --cluster create over the nodes.
func (cl *Cluster) create(tb testing.TB, cli string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, cl.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s\n%s", err, out, cl.logTails())
	}
}

// waitOK waits until every node reports cluster_state:ok.
func (cl *Cluster) waitOK(tb testing.TB) {
	tb.Helper()
	err := waitFor("cluster state", func() error {
		for _, n := range cl.nodes {
			info, err := do(n.Addr(), "CLUSTER", "INFO")
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr(), err)
			}
			if st := infoField(info, "cluster_state"); st != "ok" {
				return fmt.Errorf("%s: cluster_state is %q", n.Addr(), st)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: %v\n%s", err, cl.logTails())
	}
}

// logTails returns the log tail of every node.
func (cl *Cluster) logTails() string {
	var s string
	for _, n := range cl.nodes {
		s += "=== node " + n.Addr() + "\n" + n.logTail()
	}
	return s
}

// Addrs returns the address of every node.
func (cl *Cluster) Addrs() []string {
	addrs := make([]string, len(cl.nodes))
	for i, n := range cl.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the cluster's servers, one per master.
func (cl *Cluster) Nodes() []*Server {
	return append([]*Server(nil), cl.nodes...)
}

// Options returns cluster client options for the cluster: every node's
// address and maintenance notifications disabled. Callers may change the
// returned value.
func (cl *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                    cl.Addrs(),
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// Client returns a new cluster client with Options(), closed when the
// test ends.
func (cl *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(cl.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}
