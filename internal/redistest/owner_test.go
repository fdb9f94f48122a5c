package redistest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A server answering on our port that is not our process must be refused.
func TestCheckOwnerRefusesForeignServer(t *testing.T) {
	srv := Start(t)
	require.NoError(t, checkOwner(srv.Addr(), srv.proc.cmd.Process.Pid))
	err := checkOwner(srv.Addr(), srv.proc.cmd.Process.Pid+1)
	require.ErrorContains(t, err, "port taken by another redis-server")
}
