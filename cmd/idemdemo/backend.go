package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	_ "github.com/go-sql-driver/mysql" // the driver of mysql://
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/cmd/internal/telemetry"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/setup"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
	"github.com/idemkit/idemkit/store/memstore"     // mem://
	_ "github.com/idemkit/idemkit/store/redisstore" // redis://, rediss://, redis+sentinel://, redis+cluster://
	"github.com/idemkit/idemkit/store/sqlstore"     // postgres://, mysql://
	_ "github.com/jackc/pgx/v5/stdlib"              // the driver of postgres://
)

// storeCheckTimeout bounds the startup checks of the store.
const storeCheckTimeout = 2 * time.Second

// backend is where the service keeps its data: the idempotency store (with
// its budget, fallback and near cache) and the orders.
type backend struct {
	// store is the stack the engine uses, measured and traced by tel.
	store      store.Store
	engineOpts []idemkit.Option // the failure mode
	orders     orderRepo
	ordersDesc string
	// txOrders is orders when they commit with their idempotency records
	// (PostgreSQL without a fallback), nil otherwise.
	txOrders *pgOrders
	// primary is the store opened from the store URL, under its wrappers.
	primary store.Store
	// pg is the primary when it is a PostgreSQL sqlstore, whose database
	// (and pool) then keeps the orders too.
	pg    *sqlstore.Store
	stack *setup.Stack
	// tel is the service's OpenTelemetry wiring: the store's latency, the
	// memory stores' evictions and the fallback's breaker feed its metrics.
	tel *telemetry.Telemetry
	// closers release the backend's resources, in order.
	closers []func() error
	// storeURL and fallbackURL are the URLs as given, for describe.
	storeURL, fallbackURL string
}

// Close closes everything the backend opened, in order (the stores, and
// the bbolt file if one was opened), and returns the errors joined.
func (be *backend) Close() error {
	var errs []error
	for _, c := range be.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// openBackend builds the store stack cfg.stack describes. When the store
// is a bbolt file the orders go in the same file, so a restart finds both;
// when it is PostgreSQL they go in a table of the same database (see
// openPgOrders); otherwise they are kept in memory, bounded.
//
// The backend's telemetry measures and traces every operation of the
// stack, counts the evictions of mem:// stores and the breaker transitions
// and copy-forward conflicts of a fallback; log gets the engine's events.
func openBackend(ctx context.Context, cfg config, log *slog.Logger) (*backend, error) {
	tel, err := telemetry.New(idemkit.SlogObserver(log))
	if err != nil {
		return nil, err
	}
	be := &backend{tel: tel, storeURL: cfg.stack.Store, fallbackURL: cfg.stack.Fallback}
	sc := cfg.stack
	sc.Open = be.open
	logTier := logTierEvent(log)
	sc.OnTierEvent = func(ev tiered.Event) {
		logTier(ev)
		tel.OnTierEvent(ev)
	}
	st, err := setup.Build(ctx, sc)
	if err != nil {
		return nil, err
	}
	be.stack, be.engineOpts = st, st.Options
	be.closers = []func() error{st.Close}
	if be.store, err = tel.WrapStore(st.Store); err != nil {
		return nil, errors.Join(err, be.Close())
	}
	if be.pg != nil {
		if err := be.openPgOrders(ctx); err != nil {
			return nil, errors.Join(err, be.Close())
		}
	}
	if be.orders == nil {
		be.orders = newMemoryOrders(maxMemoryOrders, maxMemoryOrdersPerUser)
		be.ordersDesc = fmt.Sprintf("orders in memory (at most %d, %d per user)", maxMemoryOrders, maxMemoryOrdersPerUser)
	}
	checkStore(ctx, be.primary, log)
	return be, nil
}

// open opens one store of the stack. The first bbolt store (the primary)
// is opened here rather than by store.Open so that the orders can share
// its file; memory stores are opened here too, to count their evictions.
func (be *backend) open(ctx context.Context, rawURL string) (store.Store, error) {
	var s store.Store
	var err error
	u, perr := url.Parse(rawURL)
	switch {
	case perr == nil && u.Scheme == "bolt" && be.primary == nil:
		s, err = be.openBolt(rawURL)
	case perr == nil && u.Scheme == "mem":
		s, err = openMem(u, be.tel.Evicted, be.tel.Refused)
	default:
		s, err = store.Open(ctx, rawURL)
	}
	if err == nil && be.primary == nil {
		be.primary = s
		if sq, ok := s.(*sqlstore.Store); ok && sq.Dialect() == sqlstore.Postgres {
			be.pg = sq
		}
	}
	return s, err
}

// openMem opens a memory store from a mem:// URL, as store.Open would (the
// same parameters and defaults, see memstore), calling onEvict for every
// live entry it evicts and onFull for every write it refuses for want of
// room (memstore.ErrFull).
func openMem(u *url.URL, onEvict, onFull func(key string)) (store.Store, error) {
	opts, err := memstore.URLOptions(u.String())
	if err != nil {
		return nil, err
	}
	s, err := memstore.New(append(opts, memstore.WithOnEvict(onEvict), memstore.WithOnFull(onFull))...)
	if err != nil {
		return nil, fmt.Errorf("memstore: open %s: %w", store.Redact(u.String()), err)
	}
	return s, nil
}

// openPgOrders puts the orders in a table of the PostgreSQL database of the
// store. Each order and its idempotency record then commit in one
// transaction, unless a fallback store is set: a claim the fallback took
// while PostgreSQL failed is not in the table that transaction completes,
// so the records are then completed on their own, after the order.
func (be *backend) openPgOrders(ctx context.Context) error {
	st := be.pg
	if be.stack.Tiered != nil {
		st = nil
	}
	orders, err := openPgOrders(ctx, be.pg, st)
	if err != nil {
		return err
	}
	be.orders, be.txOrders = orders, orders
	be.ordersDesc = "orders in the PostgreSQL table " + ordersTable + ", each committed in one transaction with its idempotency record"
	if st == nil {
		be.txOrders = nil
		be.ordersDesc = "orders in the PostgreSQL table " + ordersTable + " (committed before their idempotency records: a fallback is set)"
	}
	return nil
}

// openBolt opens the bbolt file of a bolt:// URL with the idempotency
// records in boltstore's bucket and the orders in buckets of their own.
func (be *backend) openBolt(rawURL string) (store.Store, error) {
	c, err := boltstore.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(c.Path, 0o600, &bolt.Options{Timeout: c.OpenTimeout, NoSync: c.NoSync})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%s is locked by another process (is idemdemo already running?)", c.Path)
	}
	if err != nil {
		return nil, err
	}
	orders, err := newBoltOrders(db)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	st, err := boltstore.New(db, c.Bucket, c.SweepOptions()...)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	be.orders, be.ordersDesc = orders, "orders in the same bbolt file"
	return &boltFile{Store: st, db: db}, nil
}

// boltFile is a boltstore over a DB it closes after itself.
type boltFile struct {
	*boltstore.Store
	db *bolt.DB
}

// Close closes the store, then the file.
func (f *boltFile) Close() error { return errors.Join(f.Store.Close(), f.db.Close()) }

// checkStore warns, without failing, when the store does not answer at
// startup (a server down, a SQL table that does not exist: sqlstore's
// Ping names it), or, for Redis, may evict keys. The demo then serves
// and reports unready: GET /healthz answers 503 and requests get the
// -on-store-error policy (or the -fallback) until the store answers.
// idemproxy follows the same rule.
func checkStore(ctx context.Context, s store.Store, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	if p, ok := s.(store.Pinger); ok {
		if err := p.Ping(ctx); err != nil {
			log.Warn("the store does not answer; GET /healthz answers 503 and requests get the -on-store-error policy until it does", "error", err)
			return
		}
	}
	type evictionChecker interface{ CheckEvictionPolicy(context.Context) error }
	if ec, ok := s.(evictionChecker); ok {
		if err := ec.CheckEvictionPolicy(ctx); err != nil {
			log.Warn("redis may evict idempotency records; set maxmemory-policy noeviction", "error", err)
		}
	}
}

// describe says, for the banner, where be keeps its data.
func (be *backend) describe() string {
	if be.stack == nil {
		return be.ordersDesc
	}
	return be.stack.String() + "; " + be.ordersDesc
}

// logTierEvent logs the tiered store's breaker changes and copy problems.
func logTierEvent(log *slog.Logger) func(tiered.Event) {
	return func(ev tiered.Event) {
		switch ev.Kind {
		case tiered.EventOpen:
			log.Warn("the store is failing: answering from the fallback")
		case tiered.EventClosed:
			log.Info("the store answers again: fallback claims are copied back")
		case tiered.EventConflict, tiered.EventCopyFailed, tiered.EventJournalFull:
			log.Warn("fallback copy-forward", "event", string(ev.Kind), "error", ev.Err)
		}
	}
}
