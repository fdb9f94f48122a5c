package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/idemkit/idemkit/store"
)

// Sentinel errors. Test them with errors.Is.
var (
	// ErrLocked reports that Open could not get the exclusive lock on the
	// file within the open timeout: another Store, process or bbolt DB
	// holds it. It wraps bbolt's timeout error.
	ErrLocked = errors.New("boltstore: database file is locked by another holder")
	// ErrClosed reports an operation on a closed Store. It wraps
	// store.ErrUnavailable.
	ErrClosed = fmt.Errorf("boltstore: store is closed: %w", store.ErrUnavailable)
)

// Compile-time checks of the interfaces Store implements.
var (
	_ store.Store   = (*Store)(nil)
	_ store.Closer  = (*Store)(nil)
	_ store.Pinger  = (*Store)(nil)
	_ store.Batcher = (*Store)(nil)
)

// Store is a store.Store kept in a bbolt bucket, safe for concurrent use.
// Close it to stop its goroutines.
type Store struct {
	db     *bolt.DB
	bucket []byte
	ownsDB bool
	cfg    config

	ops  chan *op      // operations waiting for the committer
	quit chan struct{} // closed by Close

	// mu guards closed: operations hold it for reading while they check
	// closed and hand work over, Close holds it for writing to set it.
	mu     sync.RWMutex
	closed bool

	// txMu is held by whoever runs write transactions: the committer
	// while it finds work queued, or one caller running its own.
	txMu sync.Mutex
	// busy is set while the committer holds work, so that callers queue
	// behind it instead of running their own transactions.
	busy atomic.Bool

	stopSweep context.CancelFunc
	wg        sync.WaitGroup // the committer and the sweeper
	closeErr  error
	closeOnce sync.Once
}

// Open opens the bbolt file at path, creating it (mode 0600) and its
// bucket if missing, and starts the Store; Close closes the file. It fails
// with ErrLocked when another holder keeps the file locked past the open
// timeout, with store.ErrCorrupt when the file is damaged (see "Damaged
// files"), and with store.ErrInvalid for an invalid option.
func Open(path string, opts ...Option) (*Store, error) {
	cfg, err := buildConfig(opts, false)
	if err != nil {
		return nil, err
	}
	db, err := openDB(path, cfg)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s: no lock after %v: %w", ErrLocked, path, cfg.openTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s, err := start(db, cfg.bucket, true, cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("boltstore: open %s: %w", path, err), db.Close())
	}
	return s, nil
}

// openDB opens the bbolt file at path. bbolt panics when it meets a
// damaged page while opening (its freelist, say); openDB turns that into
// an error wrapping store.ErrCorrupt and closes its descriptor of the
// file. The memory map bbolt made, if any, cannot be released, and it
// keeps the file locked until the process exits: the application can
// move the damaged file aside and open a new one at the same path.
func openDB(path string, cfg config) (db *bolt.DB, err error) {
	var file *os.File
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				_ = file.Close()
			}
			db, err = nil, panicError("bbolt", "", p)
		}
	}()
	return bolt.Open(path, 0o600, &bolt.Options{
		Timeout: cfg.openTimeout,
		NoSync:  cfg.noSync,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
}

// New returns a Store over db, an open, writable bbolt DB the caller owns,
// keeping entries in bucket (created if missing). Close leaves db open.
// db's own settings stay in force, so the options only Open applies
// (WithOpenTimeout, WithNoSync, WithBucket) are invalid here.
func New(db *bolt.DB, bucket string, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("boltstore: %w: nil DB", store.ErrInvalid)
	}
	if err := checkBucket("New", bucket); err != nil {
		return nil, fmt.Errorf("boltstore: %w: %w", store.ErrInvalid, err)
	}
	if db.IsReadOnly() {
		return nil, fmt.Errorf("boltstore: %w: DB is read-only", store.ErrInvalid)
	}
	cfg, err := buildConfig(opts, true)
	if err != nil {
		return nil, err
	}
	return start(db, bucket, false, cfg)
}

// start creates the bucket and starts the Store's goroutines.
func start(db *bolt.DB, bucket string, ownsDB bool, cfg config) (*Store, error) {
	name := []byte(bucket)
	if err := createBucket(db, name); err != nil {
		return nil, fmt.Errorf("boltstore: create bucket %q: %w", bucket, err)
	}
	s := &Store{
		db:     db,
		bucket: name,
		ownsDB: ownsDB,
		cfg:    cfg,
		ops:    make(chan *op, MaxBatch),
		quit:   make(chan struct{}),
	}
	sweepCtx, stop := context.WithCancel(context.Background())
	s.stopSweep = stop
	s.wg.Add(1)
	go s.commitLoop()
	if cfg.sweepInterval > 0 {
		s.wg.Add(1)
		go s.sweepLoop(sweepCtx, cfg.sweepInterval)
	}
	return s, nil
}

// Close stops the Store's goroutines and, when Open opened the file,
// closes it. The transaction in progress commits first; operations not
// yet taken, and every later call, fail with ErrClosed. Later calls of
// Close return the first one's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.stopSweep()
		close(s.quit)
		s.wg.Wait()
		if s.ownsDB {
			if err := s.db.Close(); err != nil {
				s.closeErr = fmt.Errorf("boltstore: close: %w", err)
			}
		}
	})
	return s.closeErr
}

// Ping reports whether the Store is open and its bucket readable, as nil
// or an error wrapping store.ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	return s.view(ctx, "boltstore: ping", "", func(*bolt.Bucket, time.Time) error { return nil })
}

// Len returns the number of live (unexpired) entries, reading the whole
// bucket in one read-only transaction; it is meant for tests and metrics.
// An entry that does not decode makes it fail with an error wrapping
// store.ErrCorrupt.
func (s *Store) Len(ctx context.Context) (int, error) {
	n := 0
	err := s.view(ctx, "boltstore: len", "", func(b *bolt.Bucket, now time.Time) error {
		return b.ForEach(func(k, v []byte) error {
			r, err := decode(k, v)
			if err != nil {
				return err
			}
			if r.left(now) > 0 {
				n++
			}
			return nil
		})
	})
	return n, err
}

// view runs fn on the bucket in a read-only transaction, unless the Store
// is closed or ctx is done. A panic of bbolt (a damaged page) becomes an
// error wrapping store.ErrCorrupt that names key, when there is one: the
// background sweeper reads through view, and a panic there would kill
// the process.
func (s *Store) view(ctx context.Context, name, key string, fn func(b *bolt.Bucket, now time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return ctxError(name, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("%s: %w", name, ErrClosed)
	}
	var fnErr error
	err := s.readTx(name, key, func(b *bolt.Bucket) error {
		fnErr = fn(b, s.cfg.now())
		return nil
	})
	if err != nil {
		return err
	}
	return fnErr
}

// readTx runs fn on the bucket in a read-only transaction. It fails with
// an error wrapping store.ErrUnavailable when the transaction fails, and
// with one wrapping store.ErrCorrupt when bbolt panics.
func (s *Store) readTx(name, key string, fn func(b *bolt.Bucket) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(name, key, p)
		}
	}()
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(s.bucket)
		if b == nil {
			return errNoBucket
		}
		return fn(b)
	})
	if err != nil {
		return store.Unavailable(name, err)
	}
	return nil
}

// createBucket creates the bucket name in db if it is missing. A panic of
// bbolt (a damaged page) becomes an error wrapping store.ErrCorrupt.
func createBucket(db *bolt.DB, name []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError("bbolt", "", p)
		}
	}()
	return db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(name)
		return err
	})
}

// errNoBucket reports that the bucket vanished (someone deleted it
// through a DB passed to New).
var errNoBucket = errors.New("boltstore: bucket is missing")

// ctxError wraps a done context's error as the store contract asks: with
// store.ErrUnavailable too when the deadline passed.
func ctxError(name string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return store.Unavailable(name, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}
