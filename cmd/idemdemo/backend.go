package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/redisstore"
)

// redisCheckTimeout bounds the startup checks of a Redis store.
const redisCheckTimeout = 2 * time.Second

// backend is where the service keeps its data: the idempotency store and
// the orders.
type backend struct {
	store  store.Store
	orders orderRepo
	// closers release the backend's resources, in order.
	closers []func() error
}

// Close closes everything the backend opened, in order, and returns the
// errors joined.
func (b *backend) Close() error {
	var errs []error
	for _, c := range b.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// openBackend opens the store cfg.storeKind names.
func openBackend(ctx context.Context, cfg config, log *slog.Logger) (*backend, error) {
	switch cfg.storeKind {
	case "bolt":
		return openBolt(cfg.boltPath)
	case "memory":
		return openMemory()
	case "redis":
		return openRedis(ctx, cfg, log)
	}
	return nil, fmt.Errorf("unknown store %q", cfg.storeKind)
}

// describeStore says, for the banner, where cfg keeps its data.
func describeStore(cfg config) string {
	switch cfg.storeKind {
	case "bolt":
		return "bbolt file " + cfg.boltPath + " (idempotency records and orders)"
	case "redis":
		s := "Redis " + strings.Join(cfg.redisAddrs, ",") + ", orders in memory"
		if cfg.fallback {
			s += ", in-memory fallback while Redis is down"
		}
		return s
	}
	return "in memory (lost on exit)"
}

// openBolt opens the bbolt file at path and keeps the idempotency records
// (boltstore's bucket) and the orders (buckets of their own) in it, so a
// restart finds both. The store is closed before the file.
func openBolt(path string) (*backend, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%s is locked by another process (is idemdemo already running?)", path)
	}
	if err != nil {
		return nil, err
	}
	orders, err := newBoltOrders(db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	st, err := boltstore.New(db, boltstore.DefaultBucket)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &backend{store: st, orders: orders, closers: []func() error{st.Close, db.Close}}, nil
}

// openMemory keeps the idempotency records and the orders in memory.
func openMemory() (*backend, error) {
	st, err := memstore.New(memstore.WithSweepInterval(time.Minute))
	if err != nil {
		return nil, err
	}
	return &backend{store: st, orders: newMemoryOrders(), closers: []func() error{st.Close}}, nil
}

// openRedis keeps the idempotency records in Redis and the orders in
// memory. Each Redis call gets a time budget, so a hung Redis becomes a
// store error (503, or an unguarded run with -on-store-error open) instead
// of a hung request. With cfg.fallback, a memory store answers while Redis
// is down.
func openRedis(ctx context.Context, cfg config, log *slog.Logger) (*backend, error) {
	client := newRedisClient(cfg.redisAddrs)
	rs, err := redisstore.New(client)
	if err != nil {
		return nil, errors.Join(err, client.Close())
	}
	checkRedis(ctx, rs, log)
	be := &backend{
		store:   policy.Budget(rs, policy.DefaultBudget, policy.WithInline()),
		orders:  newMemoryOrders(),
		closers: []func() error{client.Close},
	}
	if cfg.fallback {
		if err := addFallback(be, log); err != nil {
			return nil, errors.Join(err, client.Close())
		}
	}
	return be, nil
}

// addFallback puts be's store behind a circuit breaker that switches to an
// in-process memory store while it fails. The tiered store stops before
// the Redis client closes.
func addFallback(be *backend, log *slog.Logger) error {
	mem, err := memstore.New(memstore.WithSweepInterval(time.Minute))
	if err != nil {
		return err
	}
	tiered := policy.NewTiered(be.store, mem, policy.WithTierObserver(logTierEvent(log)))
	be.store = tiered
	be.closers = append([]func() error{tiered.Close}, append(be.closers, mem.Close)...)
	return nil
}

// newRedisClient returns a client for one Redis server, or for a Redis
// Cluster when addrs lists several nodes. A failed command is not retried
// (a retried write may have been applied already), and the caller's
// deadline bounds every command.
func newRedisClient(addrs []string) redis.UniversalClient {
	maint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if len(addrs) > 1 {
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true, MaintNotificationsConfig: maint,
		})
	}
	return redis.NewClient(&redis.Options{
		Addr: addrs[0], MaxRetries: -1, ContextTimeoutEnabled: true, MaintNotificationsConfig: maint,
	})
}

// checkRedis warns, without failing, when Redis does not answer at startup
// (the failure policy then decides what requests get) or may evict keys.
func checkRedis(ctx context.Context, rs *redisstore.Store, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	if err := rs.Ping(ctx); err != nil {
		log.Warn("redis does not answer; requests get the -on-store-error policy until it does", "error", err)
		return
	}
	if err := rs.CheckEvictionPolicy(ctx); err != nil {
		log.Warn("redis may evict idempotency records; set maxmemory-policy noeviction", "error", err)
	}
}

// logTierEvent logs the tiered store's breaker changes and copy problems.
func logTierEvent(log *slog.Logger) func(policy.TierEvent) {
	return func(ev policy.TierEvent) {
		switch ev.Kind {
		case policy.TierOpen:
			log.Warn("redis failing: answering from the in-memory fallback")
		case policy.TierClosed:
			log.Info("redis answers again: fallback claims are copied back")
		case policy.TierConflict, policy.TierCopyFailed, policy.TierJournalFull:
			log.Warn("fallback copy-forward", "event", string(ev.Kind), "error", ev.Err)
		}
	}
}
