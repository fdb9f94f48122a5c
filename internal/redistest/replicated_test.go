package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// StartReplicated must return only once the primary serves the replica
// (state=online): before that, WAIT counts no replica and writes go
// unconfirmed for up to a second. Run several times, since the window
// (the primary reaping its RDB child) is only sometimes hit.
func TestStartReplicatedPrimarySeesReplicaOnline(t *testing.T) {
	ctx := context.Background()
	for i := range 10 {
		primary, replica := StartReplicated(t)
		info, err := do(primary.Addr(), "INFO", "replication")
		require.NoError(t, err)
		require.Contains(t, infoField(info, "slave0"), "state=online", "start %d", i)
		c := primary.Client(t)
		require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
		// A generous bound: a replica counted online acknowledges within
		// milliseconds; one that is not waits for its once-a-second ACK.
		n, err := c.Wait(ctx, 1, 500*time.Millisecond).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "start %d", i)
		replica.Stop()
		primary.Stop()
	}
}

func TestReplicationReady(t *testing.T) {
	up := "# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n"
	online := "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=1,state=online,offset=0,lag=0\r\n"
	require.NoError(t, replicationReady(online, up))
	require.Error(t, replicationReady(online, "master_link_status:down\r\n"))
	require.Error(t, replicationReady("connected_slaves:0\r\n", up))
	require.Error(t, replicationReady("connected_slaves:1\r\nslave0:ip=127.0.0.1,port=1,state=wait_bgsave,offset=0,lag=0\r\n", up),
		"a replica the primary still holds in wait_bgsave is not counted by WAIT")
}
