package sqlstore

import (
	"context"
	"database/sql"
	"time"
)

// sweepTimeout bounds one sweeper statement, so that a sweeper waiting on
// a lock (MySQL has no SKIP LOCKED for DELETE) gives way to live traffic.
const sweepTimeout = 5 * time.Second

// sweepLoop deletes expired rows every sweep interval until ctx is done.
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
			if s.cfg.onSweep != nil {
				s.cfg.onSweep(n, err)
			}
		}
	}
}

// Sweep deletes expired rows, in batches of the sweep batch size (see
// WithSweepBatch), until a batch finds fewer or ctx is done, and returns
// how many it deleted. It never waits on a row live traffic holds on
// PostgreSQL (FOR UPDATE SKIP LOCKED); on MySQL each batch is a
// READ COMMITTED DELETE ... LIMIT, which locks no gaps and gives up after
// a few seconds. The sweeper calls it; call it yourself with
// WithoutSweeper.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, err := s.sweepBatch(ctx)
		total += n
		if err != nil {
			return total, wrap(ctx, "sweep", "", err)
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
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.q.sweep, s.cfg.sweepBatch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
