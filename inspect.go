package idemkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// State is where a key stands, as Inspect reports it.
type State string

// States.
const (
	StateClaimed    State = "claimed"     // a Guard window is open
	StateIssued     State = "issued"      // a token waits for its use
	StateInProgress State = "in_progress" // the first execution runs (or crashed; see TTL)
	StateCompleted  State = "completed"   // a result is stored and replayed
	StateFailed     State = "failed"      // a final error is stored and replayed
	StateSpent      State = "spent"       // a token whose use failed
	StateTooLarge   State = "too_large"   // the work ran; its result was too large to keep, and every repeat gets ErrResultTooLarge
	StateReleased   State = "released"    // a claim ended without a result; the key is free, and keeps its fencing token
)

// KeyInfo describes what the store holds under a key, for support staff
// and operators. It never holds the key, the scope, the stored result or
// the fingerprint itself.
type KeyInfo struct {
	Mode  Mode
	State State
	// TTL is the time the entry has left. A claim's record outlives its
	// lease to keep the key's fencing token: see Lease.
	TTL time.Duration
	// Lease is what is left of an in-progress claim's lease: zero when it
	// has ended (the claim crashed, or its heartbeats stopped), and the
	// next request takes the key over.
	Lease time.Duration
	// Fence is the fencing token of the claim that wrote the record (see
	// FenceFromContext); zero for Guard claims and unused tokens.
	Fence uint64
	// Created and Updated are when the record was claimed and last
	// changed (zero for Guard claims and unused tokens, which keep no
	// times).
	Created, Updated time.Time
	// FingerprintDigest is a short digest of the payload fingerprint the
	// key was claimed with ("" when there is none).
	FingerprintDigest string
	// ResultSize is the size in bytes of the stored result or final error
	// (0 for StateTooLarge: nothing of the result is kept).
	ResultSize int
}

// Inspect reports what the store holds under key in mode (pass the scope
// with WithScope, and for a token the token as key and its principal as
// scope). An absent or expired key gives an error wrapping
// store.ErrNotFound.
func (e *Engine) Inspect(ctx context.Context, mode Mode, key string, opts ...Option) (KeyInfo, error) {
	sk, _, scope, err := e.modeKey("Inspect", mode, key, opts)
	if err != nil {
		return KeyInfo{}, err
	}
	ent, err := e.store.Get(ctx, sk)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("idemkit: inspect key digest %s: %w", e.keys.logDigest(scope, key), err)
	}
	return Describe(mode, ent)
}

// StoredResult returns the result (or encoded final error) stored under a
// completed key, for an operator who explicitly asked to see it. It
// returns an error wrapping store.ErrNotFound when the key is absent or
// holds no result.
func (e *Engine) StoredResult(ctx context.Context, mode Mode, key string, opts ...Option) ([]byte, error) {
	sk, _, scope, err := e.modeKey("StoredResult", mode, key, opts)
	if err != nil {
		return nil, err
	}
	ent, err := e.store.Get(ctx, sk)
	if err != nil {
		return nil, fmt.Errorf("idemkit: key digest %s: %w", e.keys.logDigest(scope, key), err)
	}
	r, err := decodeRecord(ent.Value)
	if err != nil {
		return nil, err
	}
	if r.state != stateDone && r.state != stateFailed {
		return nil, fmt.Errorf("idemkit: key digest %s: %w: no result stored (%s)", e.keys.logDigest(scope, key), store.ErrNotFound, stateName(r.state))
	}
	return r.payload, nil
}

func stateName(s byte) State {
	return map[byte]State{stateIssued: StateIssued, stateInProgress: StateInProgress,
		stateDone: StateCompleted, stateFailed: StateFailed, stateSpent: StateSpent, stateTooLarge: StateTooLarge,
		stateReleased: StateReleased}[s]
}

// Forget deletes key in mode whoever holds it, so a customer stuck behind
// an in-progress record left by a crash can retry at once. It reports
// whether there was something to delete, and reports EventForgotten to the
// observer. Forgetting a completed key lets its next request run again.
// Forgetting drops the key's fencing token with its record: the next
// claim's token comes from the clock (see the package documentation,
// "Fencing tokens").
func (e *Engine) Forget(ctx context.Context, mode Mode, key string, opts ...Option) (bool, error) {
	sk, cfg, scope, err := e.modeKey("Forget", mode, key, opts)
	if err != nil {
		return false, err
	}
	_, err = e.store.Consume(ctx, sk)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("idemkit: forget key digest %s: %w", e.keys.logDigest(scope, key), err)
	}
	e.observe(ctx, cfg, Event{Kind: EventForgotten, Mode: mode, Key: key, scope: scope})
	return true, nil
}

func (e *Engine) modeKey(call string, mode Mode, key string, opts []Option) (string, *config, string, error) {
	cfg, scope, err := e.callConfigFor(call, inspectOpts, opts)
	if err != nil {
		return "", nil, "", err
	}
	space, ok := map[Mode]int{ModeGuard: spaceGuard, ModeDo: spaceDo, ModeToken: spaceToken}[mode]
	if !ok {
		return "", nil, "", fmt.Errorf("idemkit: %w: unknown mode %q", ErrInvalid, mode)
	}
	sk, err := e.storeKey(cfg, scope, space, key)
	return sk, cfg, scope, err
}

// Describe decodes an entry the engine stored in mode, for tools that list
// a store's keys themselves. It returns an error wrapping store.ErrCorrupt
// for a value the engine did not write.
func Describe(mode Mode, ent store.Entry) (KeyInfo, error) {
	info := KeyInfo{Mode: mode, TTL: ent.TTL}
	if mode == ModeGuard {
		if !isGuardClaim(ent.Value) {
			return KeyInfo{}, fmt.Errorf("%w: not a guard claim", store.ErrCorrupt)
		}
		info.State = StateClaimed
		return info, nil
	}
	r, err := decodeRecord(ent.Value)
	if err != nil {
		return KeyInfo{}, err
	}
	info.State = stateName(r.state)
	if r.state == stateIssued {
		return info, nil
	}
	info.Created = time.UnixMilli(r.created)
	info.Updated = time.UnixMilli(r.updated)
	info.Fence = r.fence
	if r.state == stateInProgress {
		info.Lease = max(ent.TTL-time.Duration(r.tail)*time.Millisecond, 0)
	}
	if len(r.fp) > 0 {
		sum := sha256.Sum256(r.fp)
		info.FingerprintDigest = hex.EncodeToString(sum[:6])
	}
	if r.state != stateTooLarge { // a terminal record keeps nothing of the result
		info.ResultSize = len(r.payload)
	}
	return info, nil
}

// ModeOfStoreKey returns the mode of a store key the engine wrote, and
// false for any other key, for tools that list a store's keys.
func ModeOfStoreKey(storeKey string) (Mode, bool) {
	if ScopeOf(storeKey) == "" {
		return "", false
	}
	_, rest, _ := strings.Cut(storeKey, ":")
	switch rest[0] {
	case 'g':
		return ModeGuard, true
	case 'i':
		return ModeDo, true
	case 't':
		return ModeToken, true
	}
	return "", false
}
