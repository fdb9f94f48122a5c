package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
	"github.com/idemkit/idemkit/store/redisstore"
	_ "github.com/idemkit/idemkit/store/sqlstore" // postgres://, postgresql://, mysql://
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	_ "github.com/go-sql-driver/mysql" // the driver sqlstore's mysql:// needs
	_ "github.com/jackc/pgx/v5/stdlib" // the driver sqlstore's postgres:// needs
)

// stores are the stores the routes use: the primary under a time budget,
// and, when a route asks for it, the primary tiered over an in-process
// memory fallback.
type stores struct {
	primary store.Store
	tiered  store.Store // nil when no route falls back
	closers []func() error
}

// openStores opens the store URL, puts each call under budget, and builds
// the fallback tier when withFallback is set.
func openStores(ctx context.Context, rawURL string, budget time.Duration, withFallback bool, log *slog.Logger) (*stores, error) {
	raw, closeClient, err := openStore(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	s := &stores{}
	// Each wrapper owns what it wraps: closing the outermost closes all.
	if s.primary, err = policy.Budget(raw, budget, policy.WithInline()); err != nil {
		return nil, errors.Join(err, closeStore(raw), closeClient())
	}
	outer := s.primary
	if withFallback {
		mem, err := memstore.New(memstore.WithSweepInterval(time.Minute))
		if err != nil {
			return nil, errors.Join(err, closeStore(s.primary), closeClient())
		}
		t, err := policy.NewTiered(s.primary, mem, idemkit.Supersedes, policy.WithTierObserver(logTierEvent(log)))
		if err != nil {
			return nil, errors.Join(err, closeStore(s.primary), closeStore(mem), closeClient())
		}
		s.tiered, outer = t, t
	}
	s.closers = []func() error{func() error { return closeStore(outer) }, closeClient}
	return s, nil
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

// openStore opens a store URL: mem://, redis://[:password@]host:port[/db],
// or, through store.Open, postgres://, postgresql:// and mysql://.
// It returns the store and what closes the client under it, which the
// store does not own. The error never holds the URL's password.
func openStore(ctx context.Context, rawURL string) (store.Store, func() error, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: store %s: not a URL", errConfig, store.Redact(rawURL))
	}
	switch u.Scheme {
	case "mem":
		m, err := memstore.New(memstore.WithSweepInterval(time.Minute))
		if err != nil {
			return nil, nil, err
		}
		return m, func() error { return nil }, nil
	case "redis", "rediss":
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: store %s: %v", errConfig, store.Redact(rawURL), redactErr(err, rawURL))
		}
		// A failed command is not retried (a write may have been applied);
		// the caller's deadline bounds every command.
		opts.MaxRetries = -1
		opts.ContextTimeoutEnabled = true
		opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		client := redis.NewClient(opts)
		rs, err := redisstore.New(client)
		if err != nil {
			return nil, nil, errors.Join(err, client.Close())
		}
		return rs, client.Close, nil
	}
	st, err := store.Open(ctx, rawURL)
	if errors.Is(err, store.ErrInvalid) {
		return nil, nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	if err != nil {
		return nil, nil, err
	}
	return st, func() error { return nil }, nil
}

// redactErr drops rawURL's password from err's text.
func redactErr(err error, rawURL string) error {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return errors.New("invalid URL")
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
	}
	return err
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
