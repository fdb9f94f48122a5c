package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver of sqlstore's mysql://
	_ "github.com/jackc/pgx/v5/stdlib" // the driver of sqlstore's postgres://

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/boltstore"  // bolt://
	"github.com/idemkit/idemkit/store/memstore"     // mem://, and the fallback tier
	_ "github.com/idemkit/idemkit/store/redisstore" // redis://, rediss://, redis+sentinel://, redis+cluster://
	_ "github.com/idemkit/idemkit/store/sqlstore"   // postgres://, postgresql://, mysql://
)

// stores are the stores the routes use: the primary under a time budget,
// and, when a route asks for it, the primary tiered over an in-process
// memory fallback.
type stores struct {
	primary store.Store
	tiered  store.Store // nil when no route falls back
	closers []func() error
}

// openStores opens the store URL, puts each call to a store reached over
// the network under budget, and builds the fallback tier when withFallback
// is set.
func openStores(ctx context.Context, rawURL string, budget time.Duration, withFallback bool, log *slog.Logger) (*stores, error) {
	raw, err := openStore(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	s := &stores{primary: raw}
	// Each wrapper owns what it wraps: closing the outermost closes all.
	if remote(rawURL) {
		if s.primary, err = policy.Budget(raw, budget, policy.WithInline()); err != nil {
			return nil, errors.Join(err, closeStore(raw))
		}
	}
	outer := s.primary
	if withFallback {
		mem, err := memstore.New(memstore.WithSweepInterval(time.Minute))
		if err != nil {
			return nil, errors.Join(err, closeStore(s.primary))
		}
		t, err := policy.NewTiered(s.primary, mem, idemkit.Supersedes, policy.WithTierObserver(logTierEvent(log)))
		if err != nil {
			return nil, errors.Join(err, closeStore(s.primary), closeStore(mem))
		}
		s.tiered, outer = t, t
	}
	s.closers = []func() error{func() error { return closeStore(outer) }}
	return s, nil
}

// remote reports whether the store URL names a store reached over the
// network: every scheme but mem:// and bolt://, which answer in process.
func remote(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err != nil || (u.Scheme != "mem" && u.Scheme != "bolt")
}

// closeStore closes st when it is a store.Closer.
func closeStore(st store.Store) error {
	if c, ok := st.(store.Closer); ok {
		return c.Close()
	}
	return nil
}

// Close closes the stores, then the client under them.
func (s *stores) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// ping checks the primary store, when it can be checked.
func (s *stores) ping(ctx context.Context) error {
	if p, ok := s.primary.(store.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// openStore opens a store URL with store.Open, through the backends this
// program imports: mem://, bolt://, redis://, rediss://, redis+sentinel://,
// redis+cluster://, postgres://, postgresql:// and mysql://. The store owns
// its client; the error never holds the URL's password.
func openStore(ctx context.Context, rawURL string) (store.Store, error) {
	st, err := store.Open(ctx, rawURL)
	if errors.Is(err, store.ErrInvalid) {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return st, err
}

// logTierEvent logs the fallback tier's breaker changes and copy problems.
func logTierEvent(log *slog.Logger) func(policy.TierEvent) {
	return func(ev policy.TierEvent) {
		switch ev.Kind {
		case policy.TierOpen:
			log.Warn("store failing: fallback routes answer from the in-process memory store")
		case policy.TierClosed:
			log.Info("store answers again: fallback claims are copied back")
		case policy.TierConflict, policy.TierCopyFailed, policy.TierJournalFull:
			log.Warn("fallback copy-forward", "event", string(ev.Kind), "error", ev.Err)
		}
	}
}
