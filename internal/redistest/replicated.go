package redistest

import (
	"fmt"
	"strconv"
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

// WaitReplicaUp waits until replica reports master_link_status:up and
// primary reports at least one connected replica, failing the test with
// both logs after a bounded time. Use it after restarting either server.
func WaitReplicaUp(tb testing.TB, primary, replica *Server) {
	tb.Helper()
	err := waitFor("replication link", func() error {
		info, err := do(replica.Addr(), "INFO", "replication")
		if err != nil {
			return err
		}
		if s := infoField(info, "master_link_status"); s != "up" {
			return fmt.Errorf("replica master_link_status is %q", s)
		}
		info, err = do(primary.Addr(), "INFO", "replication")
		if err != nil {
			return err
		}
		if n := infoField(info, "connected_slaves"); n == "" || n == "0" {
			return fmt.Errorf("primary connected_slaves is %q", n)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: %v\nprimary %s\n%s\nreplica %s\n%s",
			err, primary.Addr(), primary.logTail(), replica.Addr(), replica.logTail())
	}
}
