package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// sweepTimeout bounds one sweeper batch.
const sweepTimeout = 10 * time.Second

// sweepLoop deletes expired rows every sweep interval until ctx is done,
// reporting each pass to the WithOnSweep hook.
func (s *Store) sweepLoop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.Sweep(ctx)
			if ctx.Err() != nil {
				return // closing: a pass cut short is no news
			}
			if s.cfg.onSweep != nil {
				s.reportSweep(n, err)
			}
		}
	}
}

// reportSweep calls the WithOnSweep hook with a pass's outcome. A
// panicking hook is recovered, as the other packages recover their
// observers: on the sweeper's own goroutine nothing else could, so it
// would kill the process, and the sweeper must keep running.
func (s *Store) reportSweep(n int64, err error) {
	defer func() { _ = recover() }()
	s.cfg.onSweep(n, err)
}

// Sweep deletes expired rows, in batches of the sweep batch size (see
// WithSweepBatch), until a batch finds fewer or ctx is done, and returns
// how many it deleted. Each batch is its own short transaction that locks
// only expired rows and skips rows live traffic holds (FOR UPDATE SKIP
// LOCKED), so it never waits on live traffic nor makes it wait beyond the
// batch. On MySQL servers without SKIP LOCKED (before MySQL 8.0.1 or
// MariaDB 10.6) a batch is a READ COMMITTED DELETE ... LIMIT instead. The
// sweeper calls Sweep; call it yourself with WithoutSweeper. After Close
// it fails with ErrClosed.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	if s.closed() {
		return 0, fmt.Errorf("sqlstore: sweep: %w", ErrClosed)
	}
	var total int64
	for ctx.Err() == nil {
		n, err := s.sweepBatch(ctx)
		total += n
		if err != nil {
			return total, s.view.wrap(ctx, "sweep", "", err)
		}
		if n < int64(s.cfg.sweepBatch) {
			break
		}
	}
	return total, nil
}

// sweepBatch deletes at most one batch of expired rows.
func (s *Store) sweepBatch(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	if s.q.base == &postgres {
		res, err := s.db.ExecContext(ctx, s.q.sweep, s.cfg.sweepBatch)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	skip, err := s.mysqlSkipLocked(ctx)
	if err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var n int64
	if skip {
		n, err = s.mysqlSweepSkipLocked(ctx, tx)
	} else {
		var res sql.Result
		if res, err = tx.ExecContext(ctx, s.q.sweep, s.cfg.sweepBatch); err == nil {
			n, err = res.RowsAffected()
		}
	}
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// mysqlSweepSkipLocked locks a batch of expired rows that no one else
// holds, and deletes them.
func (s *Store) mysqlSweepSkipLocked(ctx context.Context, tx *sql.Tx) (int64, error) {
	rows, err := tx.QueryContext(ctx, s.q.sweepLock, s.cfg.sweepBatch)
	if err != nil {
		return 0, err
	}
	var keys []any
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return 0, err
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	// One key at a time: a DELETE of an IN list may be planned as a scan,
	// which would wait on rows live traffic holds.
	var n int64
	for _, k := range keys {
		res, err := tx.ExecContext(ctx, s.q.sweepDelete, k)
		if err != nil {
			return n, err
		}
		d, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += d
	}
	return n, nil
}

// mysqlSkipLocked reports whether the server supports SKIP LOCKED, asking
// it once.
func (s *Store) mysqlSkipLocked(ctx context.Context) (bool, error) {
	switch feature(s.skipLocked.Load()) {
	case featureYes:
		return true, nil
	case featureNo:
		return false, nil
	}
	version, err := s.version(ctx)
	if err != nil {
		return false, err
	}
	r := featureNo
	if mysqlSkipLocked(version) {
		r = featureYes
	}
	s.skipLocked.Store(int32(r))
	return r == featureYes, nil
}
