package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql" // the driver of sqlstore's mysql://
	_ "github.com/jackc/pgx/v5/stdlib" // the driver of sqlstore's postgres://

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/cmd/internal/telemetry"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/tiered"
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
	// mem receives the evictions and refusals of the memory stores opened
	// here (a mem:// primary, the fallback tier), for instrument.
	mem *memHooks
}

// memHooks forwards a memory store's evictions and refusals
// (memstore.WithOnEvict, memstore.WithOnFull) to the telemetry that
// instrument sets, once it is set; the keys go no further.
type memHooks struct {
	tel atomic.Pointer[telemetry.Telemetry]
}

func (h *memHooks) evicted(key string) {
	if t := h.tel.Load(); t != nil {
		t.Evicted(key)
	}
}

func (h *memHooks) refused(key string) {
	if t := h.tel.Load(); t != nil {
		t.Refused(key)
	}
}

// options are the memory store options that report to h.
func (h *memHooks) options() []memstore.Option {
	return []memstore.Option{memstore.WithOnEvict(h.evicted), memstore.WithOnFull(h.refused)}
}

// instrument counts the evictions and refusals of the memory stores in
// tel's metrics (idemkit_evictions_total, idemkit_store_refusals_total).
func (s *stores) instrument(tel *telemetry.Telemetry) {
	s.mem.tel.Store(tel)
}

// openStores opens the store URL, puts each call to a store reached over
// the network under budget, and builds the fallback tier when withFallback
// is set.
func openStores(ctx context.Context, rawURL string, budgetD time.Duration, withFallback bool, log *slog.Logger) (*stores, error) {
	hooks := new(memHooks)
	raw, err := openStoreHooked(ctx, rawURL, hooks)
	if err != nil {
		return nil, err
	}
	checkStart(ctx, raw, rawURL, log)
	s := &stores{primary: raw, mem: hooks}
	// Each wrapper owns what it wraps: closing the outermost closes all.
	if remote(rawURL) {
		if s.primary, err = budget.New(raw, budgetD, budget.WithInline()); err != nil {
			return nil, errors.Join(err, closeStore(raw))
		}
	}
	outer := s.primary
	if withFallback {
		mem, err := memstore.New(append(hooks.options(), memstore.WithSweepInterval(time.Minute))...)
		if err != nil {
			return nil, errors.Join(err, closeStore(s.primary))
		}
		t, err := tiered.New(s.primary, mem, idemkit.Supersedes, tiered.WithObserver(logTierEvent(log)))
		if err != nil {
			return nil, errors.Join(err, closeStore(s.primary), closeStore(mem))
		}
		s.tiered, outer = t, t
	}
	s.closers = []func() error{func() error { return closeStore(outer) }}
	return s, nil
}

// storeStartTimeout bounds the start-up ping of the store.
const storeStartTimeout = 2 * time.Second

// checkStart warns when the store does not answer at start-up (within
// storeStartTimeout): a server down, a SQL table that does not exist
// (sqlstore's Ping names it). The proxy then serves and reports unready
// (the health path answers 503; each route's failure mode or fallback
// answers) until the store answers, as idemdemo does; a SQL server that
// does not answer has already stopped it in store.Open. It also warns
// that a mem:// store keeps its records in this process only.
func checkStart(ctx context.Context, st store.Store, rawURL string, log *slog.Logger) {
	if u, err := url.Parse(rawURL); err == nil && u.Scheme == "mem" {
		log.Warn("the store is in-process memory (mem://): its records are lost on restart and not shared with other instances; set store to redis://, postgres:// or mysql:// to keep them")
	}
	p, ok := st.(store.Pinger)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, storeStartTimeout)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		log.Warn("the store does not answer; the health path answers 503 and routes answer as their failure mode (or fallback) says until it does", "error", err)
	}
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

// openStore opens a store URL with store.Open (mem:// with memstore's own
// URL parsing, as store.Open does), through the backends this program
// imports: mem://, bolt://, redis://, rediss://, redis+sentinel://,
// redis+cluster://, postgres://, postgresql:// and mysql://. The store owns
// its client; the error never holds the URL's password.
func openStore(ctx context.Context, rawURL string) (store.Store, error) {
	return openStoreHooked(ctx, rawURL, new(memHooks))
}

// openStoreHooked is openStore with a mem:// store reporting its
// evictions and refusals to hooks.
func openStoreHooked(ctx context.Context, rawURL string, hooks *memHooks) (store.Store, error) {
	var st store.Store
	var err error
	if u, perr := url.Parse(rawURL); perr == nil && u.Scheme == "mem" {
		st, err = openMem(rawURL, hooks)
	} else {
		st, err = store.Open(ctx, rawURL)
	}
	if errors.Is(err, store.ErrInvalid) {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	return st, err
}

// openMem opens a mem:// store as store.Open would (the same parameters,
// scope_quota among them, and defaults), reporting to hooks.
func openMem(rawURL string, hooks *memHooks) (store.Store, error) {
	opts, err := memstore.URLOptions(rawURL)
	if err != nil {
		return nil, err
	}
	s, err := memstore.New(append(opts, hooks.options()...)...)
	if err != nil {
		return nil, fmt.Errorf("memstore: open %s: %w", store.Redact(rawURL), err)
	}
	return s, nil
}

// logTierEvent logs the fallback tier's breaker changes and copy problems.
func logTierEvent(log *slog.Logger) func(tiered.Event) {
	return func(ev tiered.Event) {
		switch ev.Kind {
		case tiered.EventOpen:
			log.Warn("store failing: fallback routes answer from the in-process memory store")
		case tiered.EventClosed:
			log.Info("store answers again: fallback claims are copied back")
		case tiered.EventConflict, tiered.EventCopyFailed, tiered.EventJournalFull:
			log.Warn("fallback copy-forward", "event", string(ev.Kind), "error", ev.Err)
		}
	}
}
