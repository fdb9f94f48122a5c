package redisstore_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// TestBatchScriptCachedMidPipeline: a batch naming a key twice, sent as
// pipelined EVALSHAs to a server that lost its script cache, must still be
// claimed by the key's first occurrence when the script gets cached again
// between the two (another client's EVAL or SCRIPT LOAD, as the fallbacks
// of a busy application's goroutines do after a restart or failover): the
// first occurrence is refused (NOSCRIPT), the second runs and claims, and
// a retry of the first in full then finds the second's value.
func TestBatchScriptCachedMidPipeline(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	src, err := os.ReadFile("lua/setnx.lua")
	require.NoError(t, err)
	var split splitWrites
	split.between = func() { require.NoError(t, admin.ScriptLoad(ctxb, string(src)).Err()) }
	opts := srv.Options()
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &splitConn{Conn: c, split: &split}, nil
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	s := newStore(t, client)
	redisstore.UseScripts(s)
	require.NoError(t, client.Ping(ctxb).Err())

	require.NoError(t, admin.ScriptFlush(ctxb).Err())
	split.arm()
	res, err := s.SetNXBatch(ctxb, []store.BatchItem{
		{Key: "k", Value: []byte("first"), TTL: time.Minute},
		{Key: "k", Value: []byte("second"), TTL: time.Minute},
	})
	require.NoError(t, err)
	require.True(t, split.done(), "the test did not split the pipeline")
	require.True(t, res[0].Set, "the first occurrence of a key must claim it")
	require.False(t, res[1].Set)
	require.Equal(t, []byte("first"), res[1].Existing.Value)
	e, err := s.Get(ctxb, "k")
	require.NoError(t, err)
	require.Equal(t, []byte("first"), e.Value)
}

// splitWrites, once armed, splits the next write holding two scripts
// (EVAL or EVALSHA) before the second one, and calls between after the server has run the
// first part.
type splitWrites struct {
	mu      sync.Mutex
	armed   bool
	did     bool
	between func()
}

func (s *splitWrites) arm() { s.mu.Lock(); s.armed = true; s.mu.Unlock() }

func (s *splitWrites) done() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.did }

type splitConn struct {
	net.Conn
	split *splitWrites
}

func (c *splitConn) Write(b []byte) (int, error) {
	c.split.mu.Lock()
	defer c.split.mu.Unlock()
	marker := []byte("*6\r\n$") // EVAL or EVALSHA of one key and two arguments
	first := bytes.Index(b, marker)
	if !c.split.armed || first < 0 {
		return c.Conn.Write(b)
	}
	second := bytes.Index(b[first+1:], marker)
	if second < 0 {
		return c.Conn.Write(b)
	}
	at := first + 1 + second
	c.split.armed, c.split.did = false, true
	n, err := c.Conn.Write(b[:at])
	if err != nil {
		return n, err
	}
	time.Sleep(100 * time.Millisecond) // the server runs the first part
	c.split.between()
	m, err := c.Conn.Write(b[at:])
	return n + m, err
}
