package idemkit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Fencing tokens: what they promise is in the package documentation
// ("Fencing tokens"); this file is how.
//
// To keep the token across a lost lease, a claim's record outlives its
// lease: it is written with a TTL of the lease plus a tail (the
// retention), and the lease has ended when no more than the tail is left.
// A caller that finds such a record, or the record a released claim
// leaves (stateReleased), takes the key over with a compare-and-swap that
// writes the next token. A heartbeat rewrites the record with a later
// update time, so that a takeover that read the record before a late beat
// landed fails instead of overwriting a lease that was just renewed.
//
// Past that horizon (no record), a key's first token comes from the
// engine's clock: milliseconds since 1970 shifted left by fenceClockShift,
// larger than every token handed out a clock-skew earlier. A token after a
// record is the larger of that and the record's token plus one.

// fenceClockShift leaves room for 2^16 takeovers of one key within one
// millisecond before a token runs ahead of the clock.
const fenceClockShift = 16

// fenceAfter returns the fencing token of a claim made at now (unix
// milliseconds, the engine's clock) that follows a claim whose token was
// prev (0: none is known).
func fenceAfter(now int64, prev uint64) uint64 {
	clock := uint64(max(now, 1)) << fenceClockShift
	return max(clock, prev+1)
}

// doTail returns the tail of a Do claim's TTL written with cfg: the
// retention, except on an OnStore view, whose claims no other caller
// sees before the transaction commits and which are never taken over
// (see OnStore).
func (e *Engine) doTail(cfg *config) time.Duration {
	if e.inTx {
		return 0
	}
	return cfg.retention
}

// Fence returns the claim's fencing token; see FenceFromContext.
func (c *Claim) Fence() uint64 { return c.rec.fence }

// FenceFromContext returns the fencing token of the claim whose work
// received ctx (Do's fn, the typed Do's fn, UseToken's fn, or a context
// derived from one), and false outside such work. Each claim of a key
// gets a larger token than every earlier claim of the key while the key
// holds a record (see the package documentation, "Fencing tokens"): pass
// it to a system the work calls, which refuses a token lower than the
// highest it has seen for the key.
func FenceFromContext(ctx context.Context) (uint64, bool) {
	c := ClaimFromContext(ctx)
	if c == nil {
		return 0, false
	}
	return c.Fence(), true
}

// takeable reports whether rec, found under a key with ent's TTL, may be
// taken over: a released claim, or a claim whose lease has ended (no
// more than its tail is left). known is false when ent was read without
// its TTL and the claim is in progress: the caller must read the TTL.
func takeable(rec *record, ent store.Entry) (ok, known bool) {
	switch {
	case rec.state == stateReleased:
		return true, true
	case rec.state != stateInProgress || rec.tail == 0:
		return false, true
	case ent.TTL == 0:
		return false, false
	}
	return ent.TTL <= time.Duration(rec.tail)*time.Millisecond, true
}

// takeover claims sk, which holds *existing, when that is a released
// claim or one whose lease has ended, by swapping it for rec (given the
// next fencing token) and its encoding. It returns the encoding written
// when it won; retry when the key changed meanwhile and the caller should
// claim again at once; neither when the record cannot be taken over, with
// *existing then holding its TTL when it was read here.
func (e *Engine) takeover(ctx context.Context, cfg *config, mode Mode, scope, key, sk string, existing *store.Entry, rec *record) (enc []byte, retry bool, err error) {
	if v := existing.Value; len(v) > 1 && v[1] != stateInProgress && v[1] != stateReleased {
		return nil, false, nil // a result: the common case, decoded once, by existing
	}
	prev, derr := decodeRecord(existing.Value)
	if derr != nil {
		return nil, false, nil // existing reports it
	}
	ok, known := takeable(&prev, *existing)
	if !known {
		ent, err := e.store.Get(ctx, sk)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, true, nil
		case err != nil:
			return nil, false, err
		case !bytes.Equal(ent.Value, existing.Value):
			return nil, true, nil
		}
		*existing = ent
		ok, _ = takeable(&prev, ent)
	}
	if !ok {
		return nil, false, nil
	}
	rec.fence = max(rec.fence, prev.fence+1)
	if prev.origin != 0 && string(prev.fp) == rec.fingerprint {
		rec.origin = prev.origin // the same operation: its recorded steps stand
	}
	enc = rec.encode()
	tail := time.Duration(rec.tail) * time.Millisecond
	set, err := e.store.CompareAndSwap(ctx, sk, existing.Value, enc, e.claimTTL(cfg, tail))
	if err != nil {
		// The swap may have landed: leave a released record with our
		// token, so the key keeps its place in the token order.
		if !errors.Is(err, store.ErrInvalid) {
			undone, uerr := e.store.CompareAndSwap(detach(ctx), sk, enc, releasedRecord(rec), max(tail, time.Millisecond))
			if uerr != nil || undone {
				e.observe(ctx, cfg, Event{Kind: EventAmbiguous, Mode: mode, Key: key, scope: scope, Err: errors.Join(err, uerr)})
			}
		}
		return nil, false, err
	}
	if !set {
		return nil, true, nil
	}
	return enc, false, nil
}

// releasedRecord is what the claim that wrote rec leaves when released:
// its fencing token, and its fingerprint and lineage, so that the next
// claim of the same operation keeps the steps it recorded.
func releasedRecord(rec *record) []byte {
	r := record{state: stateReleased, fence: rec.fence, origin: rec.origin, fingerprint: rec.fingerprint}
	return r.encode()
}

// lineage is the lineage of an operation begun by the claim with owner
// n: 64 of its random bits.
func (n nonce) lineage() uint64 { return binary.BigEndian.Uint64(n[8:16]) }

// fresh reports whether c began its operation: it carries no earlier
// claim's lineage, so no step of it can have been recorded before.
func (c *Claim) fresh() bool { return c.rec.origin == c.rec.owner.lineage() }

// swapOwn swaps this claim's record for next through s, with ttl (next nil:
// deletes it). After a heartbeat whose outcome was unknown the record may
// be the last one known or one such a beat wrote, so each is tried.
func (c *Claim) swapOwn(ctx context.Context, s store.Store, next []byte, ttl time.Duration) (bool, error) {
	try := func(old []byte) (bool, error) {
		if next == nil {
			return s.CompareAndDelete(ctx, c.sk, old)
		}
		return s.CompareAndSwap(ctx, c.sk, old, next, ttl)
	}
	ok, err := try(c.enc)
	for _, old := range c.unsure {
		if err != nil || ok {
			break
		}
		ok, err = try(old)
	}
	return ok, err
}
