package idemrelay

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// Publisher publishes claimed outbox messages to a broker and waits for
// its confirms. Publish returns one Confirm per message, in order: a nil
// Err only once the broker has stored the message. It must set the
// broker's deduplication id to the message's ID where the broker has
// one. NewJetStream and NewAMQP return Publishers.
type Publisher interface {
	Publish(ctx context.Context, msgs []sqlstore.OutboxMessage) []Confirm
}

// Confirm is the broker's answer for one message.
type Confirm struct {
	// Err is nil when the broker confirmed the message.
	Err error
	// Duplicate reports that the broker confirmed the message as a
	// duplicate of one it already holds and stored nothing (JetStream
	// within its duplicate window).
	Duplicate bool
}

// Report describes one batch.
type Report struct {
	// Claimed counts the rows the batch claimed; Published those the
	// broker confirmed and the batch removed; Duplicates those among them
	// the broker had already (a re-publish); Failed those left for a later
	// attempt.
	Claimed, Published, Duplicates, Failed int
	// Lag is the age of the batch's oldest row, by the database's clock
	// (0 for an empty batch): how far the relay runs behind.
	Lag time.Duration
	// Err is what went wrong: the claim or the commit failed (nothing was
	// removed; the rows stay), or the messages that failed, joined.
	Err error
	// Wait is how long Run waits before the next batch: 0 after a full
	// batch, the poll interval after one that was not, a back-off after
	// failures.
	Wait time.Duration
}

// Stats are a Relay's counters since New.
type Stats struct {
	Batches, Published, Duplicates, Failed uint64
	// Errors counts batches that ended with an error.
	Errors uint64
	// Lag is the last batch's Lag.
	Lag time.Duration
}

// Relay publishes the rows of a sqlstore outbox to a broker and removes
// each row once the broker confirmed it. Several Relays, in one process
// or many, may run over one outbox at once: each batch locks its rows and
// the others skip them. It is safe for concurrent use.
type Relay struct {
	st  *sqlstore.Store
	pub Publisher
	cfg config

	// failures counts consecutive batches that failed and published nothing.
	failures                                            atomic.Int64
	batches, published, duplicates, failed, errs, lagNs atomic.Int64
}

// New returns a Relay that publishes st's outbox (sqlstore.WithOutboxTable)
// through pub. Its errors wrap idemkit.ErrInvalid.
func New(st *sqlstore.Store, pub Publisher, opts ...Option) (*Relay, error) {
	var errs []error
	if st == nil {
		errs = append(errs, errors.New("nil *sqlstore.Store"))
	}
	if pub == nil {
		errs = append(errs, errors.New("nil Publisher"))
	}
	cfg, err := newConfig(opts)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		if !errors.Is(err, idemkit.ErrInvalid) {
			err = fmt.Errorf("%w: %w", idemkit.ErrInvalid, err)
		}
		return nil, fmt.Errorf("idemrelay.New: %w", err)
	}
	return &Relay{st: st, pub: pub, cfg: cfg}, nil
}

// Run publishes batches until ctx ends, then returns nil. It waits
// between batches as each Report's Wait says: not at all while batches
// come full, the poll interval when the outbox runs dry, and a back-off
// that doubles with consecutive failing batches (the database or the
// broker unreachable). Failed rows stay in the outbox.
func (r *Relay) Run(ctx context.Context) error {
	for {
		rep := r.Once(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if rep.Wait == 0 {
			continue
		}
		t := time.NewTimer(rep.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Once claims one batch, publishes it, removes the rows the broker
// confirmed and defers the others (each by a back-off of its own attempts),
// all in one transaction, and reports it (to WithObserver's function
// too). Use Run, or call Once from a loop of your own, one at a time per
// Relay.
func (r *Relay) Once(ctx context.Context) Report {
	rep := r.batch(ctx)
	switch {
	case rep.Err != nil && rep.Published == 0:
		rep.Wait = backoff(r.cfg.minBackoff, r.cfg.maxBackoff, int(r.failures.Add(1)))
	case rep.Claimed < r.cfg.batch:
		r.failures.Store(0)
		rep.Wait = r.cfg.poll
	default:
		r.failures.Store(0)
	}
	r.batches.Add(1)
	r.published.Add(int64(rep.Published))
	r.duplicates.Add(int64(rep.Duplicates))
	r.failed.Add(int64(rep.Failed))
	if rep.Err != nil {
		r.errs.Add(1)
	}
	r.lagNs.Store(int64(rep.Lag))
	if r.cfg.observer != nil {
		r.cfg.observer(rep)
	}
	return rep
}

func (r *Relay) batch(ctx context.Context) Report {
	b, err := r.st.ClaimOutbox(ctx, r.cfg.batch)
	if err != nil {
		return Report{Err: fmt.Errorf("idemrelay: claim: %w", err)}
	}
	defer b.Release()
	msgs := b.Messages()
	rep := Report{Claimed: len(msgs)}
	if len(msgs) == 0 {
		return rep
	}
	rep.Lag = msgs[0].Age
	pctx, cancel := context.WithTimeout(ctx, r.cfg.publishTimeout)
	confirms := r.pub.Publish(pctx, msgs)
	cancel()
	if len(confirms) != len(msgs) {
		return Report{Claimed: len(msgs), Lag: rep.Lag, Failed: len(msgs),
			Err: fmt.Errorf("idemrelay: the Publisher answered %d confirms for %d messages", len(confirms), len(msgs))}
	}
	var done []int64
	var retry []sqlstore.Retry
	var errs []error
	for i, c := range confirms {
		m := msgs[i]
		if c.Err != nil {
			retry = append(retry, sqlstore.Retry{Seq: m.Seq, After: backoff(r.cfg.minBackoff, r.cfg.maxBackoff, m.Attempts+1)})
			errs = append(errs, fmt.Errorf("message %s (%s on %s, attempt %d): %w", m.ID, m.Event, m.Subject, m.Attempts+1, c.Err))
			continue
		}
		done = append(done, m.Seq)
		if c.Duplicate {
			rep.Duplicates++
		}
	}
	if r.cfg.afterPublish != nil {
		var ids []string
		for i, c := range confirms {
			if c.Err == nil {
				ids = append(ids, msgs[i].ID)
			}
		}
		r.cfg.afterPublish(ids)
	}
	if ctx.Err() != nil {
		// Shutting down: the failures are the cancellation's, not the
		// messages'. Leave their rows as they were.
		retry = nil
	}
	// Remove what the broker confirmed even when ctx has just ended
	// (Run's shutdown): otherwise the next relay publishes it again.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer fcancel()
	if err := b.Finish(fctx, done, retry); err != nil {
		// Nothing was removed: a later batch publishes the rows again,
		// and the broker's deduplication drops the copies.
		rep.Duplicates = 0
		rep.Failed = len(msgs)
		rep.Err = errors.Join(append(errs, fmt.Errorf("idemrelay: remove the published rows: %w", err))...)
		return rep
	}
	rep.Published, rep.Failed = len(done), len(errs)
	if len(errs) > 0 {
		rep.Err = fmt.Errorf("idemrelay: %d of %d messages failed: %w", len(errs), len(msgs), errors.Join(errs...))
	}
	return rep
}

// finishTimeout bounds the commit that removes a batch's published rows.
const finishTimeout = 30 * time.Second

// Stats returns the Relay's counters.
func (r *Relay) Stats() Stats {
	return Stats{
		Batches: uint64(r.batches.Load()), Published: uint64(r.published.Load()),
		Duplicates: uint64(r.duplicates.Load()), Failed: uint64(r.failed.Load()),
		Errors: uint64(r.errs.Load()), Lag: time.Duration(r.lagNs.Load()),
	}
}

// Pending reports what waits in the outbox: the rows not yet published
// and the oldest one's age, by the database's clock (see
// sqlstore.Store.OutboxState). It counts the table's rows: call it from a
// metrics loop, not per batch.
func (r *Relay) Pending(ctx context.Context) (sqlstore.OutboxState, error) {
	return r.st.OutboxState(ctx)
}
