package redistest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// StartReplicated starts a primary and one replica of it (--replicaof),
// and waits until the replica reports master_link_status:up and the
// primary counts it as connected. Both are killed when the test ends. opts
// apply to both servers.
func StartReplicated(tb testing.TB, opts ...Option) (primary, replica *Server) {
	tb.Helper()
	primary = Start(tb, opts...)
	ropts := append(append([]Option(nil), opts...),
		WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	replica = Start(tb, ropts...)
	WaitReplicaUp(tb, primary, replica)
	return primary, replica
}

// WaitReplicaUp waits until replica reports master_link_status:up, the
// primary reports a replica in state=online, and a write on the primary
// is acknowledged by a replica (WAIT), failing the test with both logs
// after a bounded time. Use it after restarting either server. (A replica
// reports its link up before the primary, having reaped its RDB child,
// counts it online, and Redis 7 streams writes to it only after its next
// acknowledgement: until then WAIT counts no replica.)
func WaitReplicaUp(tb testing.TB, primary, replica *Server) {
	tb.Helper()
	err := waitFor("replication link", func() error {
		rinfo, err := do(replica.Addr(), "INFO", "replication")
		if err != nil {
			return err
		}
		pinfo, err := do(primary.Addr(), "INFO", "replication")
		if err != nil {
			return err
		}
		if err := replicationReady(pinfo, rinfo); err != nil {
			return err
		}
		return replicaAcks(primary.Addr())
	})
	if err != nil {
		tb.Fatalf("redistest: %v\nprimary %s\n%s\nreplica %s\n%s",
			err, primary.Addr(), primary.logTail(), replica.Addr(), replica.logTail())
	}
}

// replicationReady checks the INFO replication replies of a primary and
// its replica: the replica's link is up and the primary has a replica
// online.
func replicationReady(primaryInfo, replicaInfo string) error {
	if s := infoField(replicaInfo, "master_link_status"); s != "up" {
		return fmt.Errorf("replica master_link_status is %q", s)
	}
	n, _ := strconv.Atoi(infoField(primaryInfo, "connected_slaves"))
	if n < 1 {
		return fmt.Errorf("primary connected_slaves is %d", n)
	}
	for i := range n {
		if strings.Contains(infoField(primaryInfo, "slave"+strconv.Itoa(i)), "state=online") {
			return nil
		}
	}
	return errors.New("primary has no replica in state=online")
}

// replicaAcks publishes a message on the primary at addr (a write that is
// replicated but creates no key) and checks that WAIT 1 confirms it
// promptly.
func replicaAcks(addr string) error {
	replies, err := doSeq(addr,
		[]string{"PUBLISH", "__redistest__:ready", "1"},
		[]string{"WAIT", "1", "100"})
	if err != nil {
		return err
	}
	if replies[1] != "1" {
		return fmt.Errorf("WAIT 1 on the primary returned %s", replies[1])
	}
	return nil
}
