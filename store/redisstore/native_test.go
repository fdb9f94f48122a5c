package redisstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

// TestConformanceIfEqReplies runs the conformance suite, races included,
// with CompareAndSwap and CompareAndDelete sent as Redis 8.4's SET ...
// IFEQ ... PX and DELEX ... IFEQ, which the test server (Redis 7.0) does
// not know: a hook answers them as Redis 8.4 does (OK or nil; 1 or 0),
// computing the answer atomically with a script on the same server. It
// checks how the Store reads those replies, not the server.
func TestConformanceIfEqReplies(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	h := ifEqEmulator{server: srv.Client(t), answered: new(atomic.Int64)}
	client.AddHook(h)
	var stores []*redisstore.Store
	storetest.Run(t, func(t *testing.T) store.Store {
		s := newStore(t, client)
		redisstore.UseNative(s, true)
		stores = append(stores, s)
		return s
	})
	require.Positive(t, h.answered.Load(), "no SET ... IFEQ or DELEX reached the hook")
	for _, s := range stores {
		_, ifEq, detected := redisstore.Dialect(s)
		require.True(t, detected && ifEq, "a Store fell back to the scripts")
	}
}

// ifEqEmulator answers SET k new IFEQ old PX ms and DELEX k IFEQ old, as
// the Store sends them, the way Redis 8.4 does, running them as scripts
// through server, a client without the hook.
type ifEqEmulator struct {
	server   *redis.Client
	answered *atomic.Int64
}

var (
	setIfEq = redis.NewScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`)
	delIfEq = redis.NewScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])`)
)

func (h ifEqEmulator) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h ifEqEmulator) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h ifEqEmulator) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c, ok := cmd.(*redis.Cmd)
		args := cmd.Args()
		switch {
		case ok && len(args) == 7 && args[0] == "set" && args[3] == "ifeq" && args[5] == "px":
			h.answered.Add(1)
			n, err := setIfEq.Run(ctx, h.server, []string{args[1].(string)}, args[4], args[2], args[6]).Int64()
			switch {
			case err != nil:
				c.SetErr(err)
			case n == 1:
				c.SetVal("OK")
			default:
				c.SetErr(redis.Nil)
			}
			return c.Err()
		case ok && len(args) == 4 && args[0] == "delex" && args[2] == "ifeq":
			h.answered.Add(1)
			n, err := delIfEq.Run(ctx, h.server, []string{args[1].(string)}, args[3]).Int64()
			if err != nil {
				c.SetErr(err)
			} else {
				c.SetVal(n)
			}
			return c.Err()
		}
		return next(ctx, cmd)
	}
}
