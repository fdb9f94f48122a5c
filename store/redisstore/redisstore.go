package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// The Lua scripts, one per operation that needs more than one command on
// a server without the commands that do it in one (see dialect). Each
// touches exactly one key, KEYS[1].
var (
	//go:embed lua/setnx.lua
	setNXSrc string
	//go:embed lua/get.lua
	getSrc string
	//go:embed lua/cas.lua
	casSrc string
	//go:embed lua/cad.lua
	cadSrc string

	setNXScript = redis.NewScript(setNXSrc)
	getScript   = redis.NewScript(getSrc)
	casScript   = redis.NewScript(casSrc)
	cadScript   = redis.NewScript(cadSrc)

	scripts = []*redis.Script{setNXScript, getScript, casScript, cadScript}
)

// ErrNotReplicated reports a write that Redis applied on the primary but
// that fewer replicas than WithWaitReplicas asks for confirmed in time.
// Errors that wrap it also wrap store.ErrUnavailable.
var ErrNotReplicated = errors.New("redisstore: write not confirmed by enough replicas")

// Store is a store.Store kept in Redis. Every operation is one round trip
// (one command, one MULTI/EXEC transaction or one Lua script; see the
// package documentation) touching exactly one key, so it works unchanged
// on a standalone server, behind Sentinel and on Redis Cluster.
//
// Create a Store with New; the zero value is not usable. A Store does not
// own its client: closing the client is the caller's job, and a Store has
// no Close method. A Store is safe for concurrent use by multiple
// goroutines.
type Store struct {
	client      Client
	prefix      string
	waitN       int
	waitTimeout time.Duration
	dial        atomic.Pointer[dialect]        // nil until detected; see Store.dialect
	pxArgs      [pxSlots]atomic.Pointer[pxArg] // recent TTLs' PX arguments; see Store.px
	pxNext      atomic.Uint32                  // the slot of pxArgs to replace next
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.Pinger      = (*Store)(nil)
	_ store.SetNXValuer = (*Store)(nil)
)

// Client is the part of a go-redis client that a Store uses.
// redis.UniversalClient satisfies it, and so *redis.Client (standalone,
// or Sentinel from redis.NewFailoverClient), *redis.ClusterClient and
// *redis.Ring do.
type Client interface {
	redis.Scripter
	Do(ctx context.Context, args ...any) *redis.Cmd
	Process(ctx context.Context, cmd redis.Cmder) error
	GetDel(ctx context.Context, key string) *redis.StringCmd
	Ping(ctx context.Context) *redis.StatusCmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	Pipeline() redis.Pipeliner
	TxPipeline() redis.Pipeliner
}

// Option configures a Store. An option that cannot take effect makes New
// return an error naming it; a nil option is refused by its position.
type Option func(*config) error

// config holds the settings Options change.
type config struct {
	prefix      string
	waitN       int
	waitTimeout time.Duration
}

// WithPrefix sets a namespace prepended to every key, so that several
// applications (or several idemkit engines) can share one Redis. The
// default is no prefix. store.MaxKeyLen applies to keys without it.
//
// On Redis Cluster the part of a key between the first "{" and the next
// "}" (a hash tag) alone selects the key's slot. Every operation touches
// a single key, so the cluster accepts any prefix; put a hash tag in the
// prefix, for example "idem:{orders}:", only to pin all the Store's keys
// to one slot (and one node), which also concentrates their load there.
func WithPrefix(ns string) Option {
	return func(c *config) error {
		c.prefix = ns
		return nil
	}
}

// WithWaitReplicas makes every write that changed something (a SetNX that
// stored, a CompareAndSwap that swapped, a CompareAndDelete that deleted,
// a Consume that consumed) wait, with Redis's WAIT, until n replicas have
// confirmed it, for at most timeout (rounded up to a whole millisecond).
// By default no operation waits. When fewer than n confirm in time, the
// operation returns an error wrapping ErrNotReplicated and
// store.ErrUnavailable, and its other results describe the write, which
// DID happen on the primary: WAIT does not roll it back.
//
// New rejects n < 1, timeout <= 0, a timeout not below the client's
// ReadTimeout, and clients other than *redis.Client (standalone or
// Sentinel failover) and *redis.ClusterClient; WithWaitReplicas(0, 0), the
// default, turns waiting off. See the package documentation, section
// "Replication, failover and WAIT", for what it costs and protects.
func WithWaitReplicas(n int, timeout time.Duration) Option {
	return func(c *config) error {
		if (n != 0 || timeout != 0) && (n < 1 || timeout <= 0) {
			return fmt.Errorf("WithWaitReplicas(%d, %v): needs n >= 1 and a positive timeout, or (0, 0) for no waiting", n, timeout)
		}
		c.waitN = n
		c.waitTimeout = timeout
		return nil
	}
}

// New returns a Store that keeps its entries through client. New sends
// nothing to Redis. It returns an error wrapping store.ErrInvalid, naming
// each culprit, when client is nil (or a typed nil) or an option is nil or
// invalid.
//
// The server must run Redis 6.2 or later (Consume uses GETDEL).
func New(client Client, opts ...Option) (*Store, error) {
	if isNil(client) {
		return nil, fmt.Errorf("redisstore: %w: nil client", store.ErrInvalid)
	}
	var c config
	errs := options.Collect(&c, opts)
	s := &Store{client: client, prefix: c.prefix, waitN: c.waitN, waitTimeout: c.waitTimeout}
	if len(errs) == 0 {
		errs = append(errs, s.checkWait())
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	return s, nil
}

// isNil reports whether c is nil or a typed nil (a nil pointer, map,
// func, chan or slice of any client type), on which every method would
// panic or fail. Any type can implement Client, so only reflection can
// tell.
func isNil(c Client) bool {
	if c == nil {
		return true
	}
	switch v := reflect.ValueOf(c); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// checkWait validates the WithWaitReplicas settings, already checked on
// their own by the option, against the client, and rounds the timeout up
// to the whole millisecond WAIT takes.
func (s *Store) checkWait() error {
	if s.waitN == 0 {
		return nil
	}
	s.waitTimeout = store.RoundTTL(s.waitTimeout)
	var readTimeout time.Duration
	switch c := s.client.(type) {
	case *redis.Client:
		readTimeout = c.Options().ReadTimeout
	case *redis.ClusterClient:
		readTimeout = c.Options().ReadTimeout
	default:
		return fmt.Errorf("WithWaitReplicas: needs a *redis.Client or *redis.ClusterClient, not %T", s.client)
	}
	if readTimeout > 0 && s.waitTimeout >= readTimeout {
		return fmt.Errorf("WithWaitReplicas: timeout %v must be below the client's ReadTimeout %v", s.waitTimeout, readTimeout)
	}
	return nil
}

// key returns the Redis key for the caller's key.
func (s *Store) key(k string) string {
	if s.prefix == "" {
		return k
	}
	return s.prefix + k
}

// LoadScripts loads the Store's Lua scripts into the script cache of
// Redis (of every node, on a cluster), so that no operation pays the
// extra round trip of a first use. It is optional: an operation whose
// script is missing from the cache (a first use, a restarted server, a
// failover, SCRIPT FLUSH) sends EVALSHA, gets NOSCRIPT and falls back to
// EVAL, two round trips once, one thereafter. It also asks the server
// which commands it offers, which the first operation would otherwise do.
func (s *Store) LoadScripts(ctx context.Context) error {
	err := s.forEachNode(ctx, func(ctx context.Context, c Client, _ string) error {
		for _, sc := range scripts {
			if err := sc.Load(ctx, c).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		_, err = s.dialect(ctx)
	}
	if err != nil {
		return s.fail(ctx, "load scripts", "", err)
	}
	return nil
}

// Ping checks that Redis answers: the server, or every master of a
// cluster (every shard of a ring). It returns nil or an error wrapping
// store.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	err := s.forEachNode(ctx, func(ctx context.Context, c Client, _ string) error {
		return c.Ping(ctx).Err()
	})
	if err != nil {
		return s.fail(ctx, "ping", "", err)
	}
	return nil
}

// forEachNode calls fn for the server behind the client, or for every
// master of a cluster, or every shard of a ring, naming each node's
// address ("" for a plain client).
func (s *Store) forEachNode(ctx context.Context, fn func(ctx context.Context, c Client, addr string) error) error {
	node := func(ctx context.Context, c *redis.Client) error {
		return fn(ctx, c, c.Options().Addr)
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, node)
	case *redis.Ring:
		return c.ForEachShard(ctx, node)
	}
	return fn(ctx, s.client, "")
}
