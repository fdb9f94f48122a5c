package idemkit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Claim is an execution of Do that this caller was admitted to run and
// has not finished yet: the key holds this caller's in-progress record,
// whose lease a heartbeat extends until the claim ends. Begin hands one
// out, for callers that run the work themselves instead of passing fn to
// Do: a handler that completes the record inside its own database
// transaction, a queue consumer that acks after completing.
//
// A claim from Begin has no context for the work: the caller's context is
// its own. The heartbeat still extends the lease, and when a beat finds it
// lost (another caller holds the key) it reports EventLeaseLost, and
// Complete and CompleteIn then return ErrLeaseLost without writing. Do and
// UseToken, which run fn under a claim, also cancel fn's context with
// cause ErrLeaseLost, including when the lease ends unconfirmed; see the
// package documentation, section "Leases and oversized results".
//
// A claim ends with exactly one of Complete, CompleteIn, Fail or Release;
// later calls of any of them change nothing (Release after CompleteIn is
// the exception, see CompleteIn). Defer Release right after Begin: it is a
// no-op once the claim has been completed. A Claim is safe for concurrent
// use.
type Claim struct {
	e    *Engine
	cfg  *config
	mode Mode
	key  string // the caller's key, for events
	// scope is the caller's scope (a token's principal), for events
	scope string
	sk    string
	rec   record
	enc   []byte // the record under the key, as this claim last wrote it
	// unsure are records a heartbeat wrote with an unknown outcome: the
	// key may hold one of them instead of enc (see swapOwn).
	unsure [][]byte
	hb     heartbeat
	steps  steps // the steps its work ran (Step)

	started time.Time   // when the claim was won (admit)
	timed   atomic.Bool // an event ending the claim has carried its Duration
	lostOne atomic.Bool // EventLeaseLost was reported: once per claim
	fnCtx   claimCtx    // fn's context (run)

	mu      sync.Mutex
	ended   bool
	inTx    bool   // CompleteIn ran and nothing has settled it yet: the outcome depends on the caller's commit
	tx      bool   // CompleteIn ended the claim
	txValue []byte // the value CompleteIn recorded, when it did
	// txTooLarge is the error CompleteIn returned after writing a terminal
	// record for an oversized value, when it did.
	txTooLarge error
	// txErr is the error CompleteIn returned when it recorded nothing
	// (ErrLeaseLost, a store error), so that Do never reports success for
	// a result that was not recorded, whatever fn did with the error.
	txErr error
}

func (e *Engine) newClaim(cfg *config, mode Mode, scope, key, sk, fingerprint string, tail time.Duration) *Claim {
	rec, enc := e.claimRecord(cfg, fingerprint, tail)
	return e.claimOf(cfg, mode, scope, key, sk, rec, enc)
}

// claimRecord returns a fresh in-progress record for fingerprint and its
// encoding, the value a claim writes, with a first fencing token and the
// tail of its TTL after the lease (see fence.go).
func (e *Engine) claimRecord(cfg *config, fingerprint string, tail time.Duration) (record, []byte) {
	now := cfg.clock().UnixMilli()
	rec := record{state: stateInProgress, owner: e.newNonce(), created: now, updated: now, fingerprint: fingerprint,
		fence: fenceAfter(now, 0), tail: tail.Milliseconds(), payload: inputPayload(cfg)}
	rec.origin = rec.owner.lineage() // a new operation, unless a takeover carries one on
	return rec, rec.encode()
}

// claimOf returns the Claim that wrote rec, encoded as enc, under sk.
func (e *Engine) claimOf(cfg *config, mode Mode, scope, key, sk string, rec record, enc []byte) *Claim {
	return &Claim{e: e, cfg: cfg, mode: mode, scope: scope, key: key, sk: sk, rec: rec, enc: enc}
}

// admit reports the claim admitted and starts its clock: the Duration of
// the event that ends it counts the work, not a wait before admission.
func (c *Claim) admit(ctx context.Context) {
	c.started = time.Now()
	c.e.observe(ctx, c.cfg, Event{Kind: EventAdmitted, Mode: c.mode, Key: c.key, scope: c.scope})
}

// Begin claims key the way Do does, but returns the claim instead of
// running a function: the caller runs the work and ends the claim. Exactly
// one of these holds:
//
//   - claim != nil: this caller was admitted and must end the claim;
//   - res.Replayed: the key holds an earlier execution's result (Value, or
//     the final error returned as err, or an error wrapping
//     ErrResultTooLarge when that result was too large to keep);
//   - res.Unguarded: the store failed under FailOpen; run unguarded;
//   - err != nil: ErrInProgress, ErrMismatch, ErrUnavailable and the
//     others Do returns before running fn.
func (e *Engine) Begin(ctx context.Context, key, fingerprint string, opts ...Option) (claim *Claim, res Result, err error) {
	cfg, scope, err := e.callConfigFor("Begin", beginOpts, opts)
	if err != nil {
		return nil, Result{}, err
	}
	ctx, end := trace(ctx, cfg, ModeDo, "Begin")
	defer func() { endTrace(end, err) }()
	sk, err := e.storeKey(cfg, scope, spaceDo, key)
	if err != nil {
		return nil, Result{}, err
	}
	c, res, err := e.begin(ctx, cfg, scope, key, sk, e.keys.storedFingerprint(fingerprint))
	if c != nil {
		c.startHeartbeat(ctx, nil)
	}
	return c, res, err
}

// run runs fn under the claim and ends it with fn's outcome, also when fn
// panics or calls runtime.Goexit. fn's context carries the claim
// (ClaimFromContext), so fn may complete it in its own transaction; run
// then settles the claim by the transaction's outcome (see afterTx).
//
// With a heartbeat, fn's context is cancelled with cause ErrLeaseLost
// when the lease is lost (see heartbeat), and when fn returns. A claim
// whose lease was lost records nothing: run returns fn's value with
// ErrLeaseLost (see leaseLost).
func (c *Claim) run(ctx context.Context, fn func(context.Context) ([]byte, error)) (Result, error) {
	fctx, cancel := ctx, context.CancelCauseFunc(nil)
	if c.beatEvery() > 0 {
		fctx, cancel = context.WithCancelCause(ctx)
	}
	c.fnCtx = claimCtx{Context: fctx, c: c}
	c.startHeartbeat(ctx, cancel)
	returned := false
	defer func() {
		if cancel != nil {
			cancel(nil)
		}
		if !returned {
			c.Release(ctx)
		}
	}()
	v, err := fn(&c.fnCtx)
	returned = true
	if c.completedInTx() {
		return c.afterTx(ctx, v, err)
	}
	if c.hb.isLost() {
		c.end(false)
		return Result{Value: v}, leaseLost(err)
	}
	if err != nil {
		return Result{}, c.Fail(ctx, err)
	}
	return Result{Value: v}, c.Complete(ctx, v)
}

// leaseLost is what Do returns when the claim's lease was lost while fn
// ran: fn's error when it names the lost lease, ErrLeaseLost when fn
// succeeded or returned its context's cancellation, or else ErrLeaseLost
// joined with fn's error.
func leaseLost(err error) error {
	switch {
	case errors.Is(err, ErrLeaseLost) && !errors.Is(err, context.Canceled):
		return err
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, ErrLeaseLost):
		return ErrLeaseLost
	}
	return errors.Join(ErrLeaseLost, err)
}

// end marks the claim ended and stops its heartbeat. It reports false when
// the claim had ended already.
func (c *Claim) end(inTx bool) bool {
	c.mu.Lock()
	ended := c.ended
	c.ended, c.inTx = true, inTx
	c.mu.Unlock()
	if ended {
		return false
	}
	c.hb.stop()
	return true
}

// Complete records value as the result that every repeat of the key gets.
// A value over the size cap (WithMaxResultSize, a record over the store's
// value limit, or one the store refuses with ErrInvalid, such as memstore
// over its byte budget) is not recorded: Complete returns an error
// wrapping ErrResultTooLarge, and the key keeps a terminal record from
// which every repeat gets ErrResultTooLarge without running the work
// (KeepTerminal, the default), or is released (ReleaseKey); see
// WithOversized. Complete also returns ErrLeaseLost (another caller took
// the key over, or the heartbeat found the lease lost; nothing was
// recorded) or ErrUnavailable (the store failed;
// the key frees itself when the lease ends), joined with ErrResultTooLarge
// when the value was oversized.
func (c *Claim) Complete(ctx context.Context, value []byte) error {
	if !c.end(false) {
		return nil
	}
	if c.hb.isLost() {
		return ErrLeaseLost // reported when the heartbeat found it
	}
	tooLarge := c.oversize(ctx, value)
	switch {
	case tooLarge == nil:
		err := c.complete(ctx, c.e.store, stateDone, value, false)
		switch {
		case err == nil, errors.Is(err, ErrUnavailable), errors.Is(err, ErrLeaseLost):
			return err
		case !errors.Is(err, ErrInvalid):
			c.release(ctx, false)
			return err
		}
		// The store refused the record (over a limit of its own, such as
		// memstore's byte budget): the result cannot be kept, and the key
		// keeps a terminal record, or is released, as for any oversized
		// result.
		c.e.observe(ctx, c.cfg, Event{Kind: EventTooLarge, Mode: c.mode, Key: c.key, scope: c.scope})
		tooLarge = fmt.Errorf("%w: the store refused the record: %w", ErrResultTooLarge, err)
		if c.cfg.oversized == ReleaseKey {
			c.release(ctx, false)
			return tooLarge
		}
	case c.cfg.oversized == ReleaseKey:
		c.release(ctx, false)
		return tooLarge
	}
	if err := c.complete(ctx, c.e.store, stateTooLarge, sizePayload(len(value)), true); err != nil {
		return errors.Join(tooLarge, err)
	}
	return tooLarge
}

// CompleteIn records value through s, a view of the engine's store bound
// to the caller's transaction (such as a SQL store's transaction view), so
// the record commits or rolls back with the caller's business write. An
// error wrapping ErrLeaseLost (another caller owns the key now) or
// ErrResultTooLarge (the value is over the size cap) means: roll the
// transaction back, then call Release so a retry can run at once. After a
// commit, Release finds the completed record and changes nothing. The key
// is never released before the transaction has ended. See the package
// documentation, section "Completing inside a transaction".
func (c *Claim) CompleteIn(ctx context.Context, s store.Store, value []byte) error {
	if s == nil {
		return fmt.Errorf("idemkit: %w: nil transaction store", ErrInvalid)
	}
	if !c.end(true) {
		return nil
	}
	c.mu.Lock()
	c.tx = true
	c.mu.Unlock()
	if c.hb.isLost() { // reported when the heartbeat found it
		c.mu.Lock()
		c.txErr = ErrLeaseLost
		c.mu.Unlock()
		return ErrLeaseLost
	}
	if tooLarge := c.oversize(ctx, value); tooLarge != nil {
		if c.cfg.oversized == ReleaseKey {
			return tooLarge
		}
		if err := c.complete(ctx, s, stateTooLarge, sizePayload(len(value)), false); err != nil {
			err = errors.Join(tooLarge, err)
			c.mu.Lock()
			c.txErr = err
			c.mu.Unlock()
			return err
		}
		c.mu.Lock()
		c.txTooLarge = tooLarge
		c.mu.Unlock()
		return tooLarge
	}
	if err := c.complete(ctx, s, stateDone, value, false); err != nil {
		c.mu.Lock()
		c.txErr = err
		c.mu.Unlock()
		return err
	}
	c.mu.Lock()
	c.txValue = value
	c.mu.Unlock()
	return nil
}

// Fail ends the claim after the work failed with err and returns err
// (joined with any error recording it). When the ErrorCodec says err is
// final, it is recorded and replayed like a result; otherwise the key is
// released so a retry runs again (an unused token is spent instead).
func (c *Claim) Fail(ctx context.Context, err error) error {
	if !c.end(false) {
		return err
	}
	if c.cfg.errorCodec != nil {
		if data, final := c.cfg.errorCodec.EncodeError(err); final {
			if rerr := c.complete(ctx, c.e.store, stateFailed, data, true); rerr != nil {
				return errors.Join(err, rerr)
			}
			return err
		}
	}
	c.release(ctx, false)
	return err
}

// Release ends the claim without a result, so a retry runs the work again
// (a token is spent instead). It only ever removes this caller's own
// in-progress record, so it is safe to defer: after Complete it changes
// nothing, and after CompleteIn it undoes the claim only if the caller's
// transaction did not commit.
func (c *Claim) Release(ctx context.Context) {
	c.mu.Lock()
	ended, inTx := c.ended, c.inTx
	c.ended, c.inTx = true, false
	c.mu.Unlock()
	if ended && !inTx {
		return
	}
	if !ended {
		c.hb.stop()
	}
	c.release(ctx, inTx)
}

// completedInTx reports whether CompleteIn ended the claim.
func (c *Claim) completedInTx() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tx
}

// afterTx ends a claim that fn completed with CompleteIn, once fn has
// returned v and err: by then fn has committed or rolled back. The key is
// read once: this claim's completed record means the transaction
// committed, and the result is the recorded value; this claim's terminal
// record (an oversized value, committed despite CompleteIn's error) means
// it committed too, and err is joined with ErrResultTooLarge; this claim's
// in-progress record means it did not, and the record is removed so a
// retry runs again (unless fn released the claim itself); anything else
// (the lease was lost) is left alone. Without a commit the result is fn's
// value. err is fn's, joined with ErrUnavailable when the store could not
// tell, and with the error CompleteIn returned when it recorded nothing
// (ErrLeaseLost, say) and fn's err does not already wrap it: fn that
// commits despite that error, or returns its value without an error after
// rolling back, still gets an error, never a success whose result was
// never recorded.
func (c *Claim) afterTx(ctx context.Context, v []byte, err error) (Result, error) {
	c.mu.Lock()
	pending, value, tooLarge, txErr := c.inTx, c.txValue, c.txTooLarge, c.txErr
	c.inTx = false
	c.mu.Unlock()
	if txErr != nil && !errors.Is(err, txErr) && !(errors.Is(txErr, ErrLeaseLost) && errors.Is(err, ErrLeaseLost)) {
		err = errors.Join(err, txErr)
	}
	state, serr := c.recordState(ctx)
	if serr != nil {
		if pending {
			c.release(ctx, true) // best effort: removes only our in-progress record
		}
		return Result{Value: v}, errors.Join(err, unavailable("read the transaction's record", serr))
	}
	switch {
	case state == stateDone && value != nil:
		return Result{Value: value}, err
	case state == stateTooLarge && tooLarge != nil:
		if !errors.Is(err, ErrResultTooLarge) {
			err = errors.Join(err, tooLarge)
		}
		return Result{Value: v}, err
	case state == stateInProgress && pending:
		if _, rerr := c.release(ctx, true); rerr != nil {
			return Result{Value: v}, errors.Join(err, unavailable("release the transaction's claim", rerr))
		}
	case state == 0 && pending && !c.timed.Load():
		c.lost(ctx) // CompleteIn wrote nothing (oversized under ReleaseKey), and the key is no longer ours
	}
	return Result{Value: v}, err
}

// recordState returns the state of this claim's record under the key, or
// 0 when the key holds no record of this claim.
func (c *Claim) recordState(ctx context.Context) (byte, error) {
	ent, err := c.e.store.Get(detach(ctx), c.sk)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	rec, err := decodeRecord(ent.Value)
	if err != nil || rec.owner != c.rec.owner {
		return 0, nil
	}
	return rec.state, nil
}

// oversize returns nil when value can be recorded. Otherwise (over the
// size cap, or a record over the store's value limit) it reports
// EventTooLarge and returns the error wrapping ErrResultTooLarge the
// caller gets.
func (c *Claim) oversize(ctx context.Context, value []byte) error {
	if len(value) <= c.cfg.maxResult && c.rec.encodedLen(len(value)) <= store.MaxValueLen {
		return nil
	}
	c.e.observe(ctx, c.cfg, Event{Kind: EventTooLarge, Mode: c.mode, Key: c.key, scope: c.scope})
	return fmt.Errorf("%w: %d bytes, cap %d", ErrResultTooLarge, len(value), c.cfg.maxResult)
}

// sizePayload is the payload of a terminal record: the size of the
// result that was not kept.
func sizePayload(n int) []byte { return binary.AppendUvarint(nil, uint64(n)) }

// tooLargeReplay is the error a repeat of a key holding a terminal record
// gets; payload is the record's.
func tooLargeReplay(payload []byte) error {
	const why = "the first execution with this key ran, but its result was too large to keep; it does not run again"
	if n, w := binary.Uvarint(payload); w > 0 && w == len(payload) {
		return fmt.Errorf("%w: %s (%d bytes)", ErrResultTooLarge, why, n)
	}
	return fmt.Errorf("%w: %s", ErrResultTooLarge, why)
}

// complete swaps this caller's in-progress record for the final one,
// through s. A store error other than unavailability releases the key
// when own is set (s is the engine's store); through a transaction's view
// the caller rolls back and releases once the transaction has ended.
func (c *Claim) complete(ctx context.Context, s store.Store, state byte, payload []byte, own bool) error {
	cfg := c.cfg
	done := c.rec
	done.state = state
	done.updated = cfg.clock().UnixMilli()
	done.payload = payload
	enc := done.encode()
	ok, err := c.swapOwn(detach(ctx), s, enc, cfg.retention)
	if err != nil {
		c.ends(ctx, Event{Kind: EventStoreError, Mode: c.mode, Key: c.key, scope: c.scope, Err: err})
		if !errors.Is(err, ErrUnavailable) {
			if own {
				c.release(ctx, false)
			}
			return fmt.Errorf("idemkit: record result: %w", err)
		}
		return unavailable("record result", err)
	}
	if !ok && !c.holds(ctx, s, enc) {
		c.lost(ctx)
		return ErrLeaseLost
	}
	c.ends(ctx, Event{Kind: EventCompleted, Mode: c.mode, Key: c.key, scope: c.scope})
	return nil
}

// holds reports whether the key holds enc, this claim's final record,
// through s: a swap that landed can be reported as not applied (a client
// library retried it after losing the reply, and the retry found the value
// changed).
func (c *Claim) holds(ctx context.Context, s store.Store, enc []byte) bool {
	ent, err := s.Get(detach(ctx), c.sk)
	return err == nil && bytes.Equal(ent.Value, enc)
}

// ends reports ev, an event that ends the claim. The first such event of
// the claim carries the claim's Duration, and no later one does, so that
// an observer sees exactly one event with a Duration per admitted claim
// (see Event.Duration); a failed completion may be followed by a release,
// and a completion in a transaction that rolled back is.
func (c *Claim) ends(ctx context.Context, ev Event) {
	if c.timed.CompareAndSwap(false, true) {
		ev.Duration = max(time.Since(c.started), 1) // > 0 on a coarse clock too
	}
	c.e.observe(ctx, c.cfg, ev)
}

// lost reports a claim that ended because another caller took the key
// over (or an operator forgot it).
func (c *Claim) lost(ctx context.Context) {
	if !c.lostOne.CompareAndSwap(false, true) {
		return // reported already, by the heartbeat or an earlier completion
	}
	c.ends(ctx, Event{Kind: EventLeaseLost, Mode: c.mode, Key: c.key, scope: c.scope, Err: ErrLeaseLost})
}

// release undoes the claim after a failure that is not final: an
// idempotency key is deleted so a retry runs again; a token is marked spent.
// afterTx says the claim was completed in a transaction, where finding no
// in-progress record of ours means the transaction committed. It reports
// whether it removed (or, for a token, spent) this claim's record.
func (c *Claim) release(ctx context.Context, afterTx bool) (bool, error) {
	e, cfg := c.e, c.cfg
	bg := detach(ctx)
	var ok bool
	var err error
	switch {
	case c.mode == ModeToken:
		spent := c.rec
		spent.state = stateSpent
		spent.updated = cfg.clock().UnixMilli()
		ok, err = c.swapOwn(bg, e.store, spent.encode(), cfg.tokenTTL)
	case c.rec.tail > 0:
		// The key keeps the claim's fencing token for the next claim.
		ok, err = c.swapOwn(bg, e.store, releasedRecord(&c.rec), time.Duration(c.rec.tail)*time.Millisecond)
	default:
		ok, err = c.swapOwn(bg, e.store, nil, 0)
	}
	switch {
	case err != nil:
		c.ends(ctx, Event{Kind: EventStoreError, Mode: c.mode, Key: c.key, scope: c.scope, Err: fmt.Errorf("release: %w", err)})
	case ok:
		c.ends(ctx, Event{Kind: EventReleased, Mode: c.mode, Key: c.key, scope: c.scope})
	case !afterTx || !c.timed.Load():
		// After a transaction, no record of ours means it committed, and
		// its completion ended the claim; unless the completion wrote
		// nothing (an oversized value under ReleaseKey): then the lease was
		// lost.
		c.lost(ctx)
	}
	return ok, err
}
