package idemkit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Resuming abandoned operations.
//
// An operation claimed with WithInput keeps its name and input in its
// claim's record. When the caller that claimed it is gone (its lease
// ended, and no client retries), Resume takes the operation over by its
// store key, as a retry would, and runs the function registered for its
// name with its input: its recorded steps are skipped, the first
// unfinished one runs again, and the result is recorded for the client's
// late retries. The completer package finds such operations and resumes
// them.

// MaxInputLen is the largest input WithInput takes, in bytes.
const MaxInputLen = 64 << 10

var (
	// ErrNotAbandoned is returned by Resume for a key that holds no
	// abandoned operation: its claim's lease still runs, it finished, it
	// was released, or another caller resumed it first.
	ErrNotAbandoned = errors.New("idemkit: operation not abandoned")
	// ErrNoInput is returned by Resume for an abandoned operation claimed
	// without WithInput: nothing says how to resume it.
	ErrNoInput = errors.New("idemkit: operation has no stored input")
	// ErrNoFunction is returned by Resume for an abandoned operation whose
	// name has no function in the Funcs given. Nothing is claimed.
	ErrNoFunction = errors.New("idemkit: no function registered for the operation")
)

// A ResumeFunc resumes an operation from its input. It runs as Do's fn
// does: its context carries the claim, so Step, StepKey and
// FenceFromContext work in it.
type ResumeFunc func(ctx context.Context, input []byte) ([]byte, error)

// Funcs are the ResumeFuncs of operations by name (WithInput).
type Funcs map[string]ResumeFunc

// WithInput stores the operation's name and its input with its claim
// (Do, Begin), so that Resume can finish the operation if its caller
// goes away. name is what Funcs registers its ResumeFunc under: 1 to
// MaxStepNameLen bytes of printable UTF-8; input (at most MaxInputLen
// bytes) is what that function gets. Both are kept in the claim's record
// until the operation completes: put nothing in them that the store must
// not hold. Per call only.
func WithInput(name string, input []byte) Option {
	input = append([]byte(nil), input...) // the caller may reuse its buffer
	return func(c *config) error {
		c.set |= optInput
		if err := checkStepName(name); err != nil {
			return fmt.Errorf("WithInput: the operation name must have 1 to %d bytes of printable UTF-8", MaxStepNameLen)
		}
		if len(input) > MaxInputLen {
			return fmt.Errorf("WithInput: the input has %d bytes, over MaxInputLen %d", len(input), MaxInputLen)
		}
		c.opName, c.opInput = name, input
		return nil
	}
}

// inputPayload is the payload of a claim made with WithInput: the
// operation's name, its length first, and its input.
func inputPayload(cfg *config) []byte {
	if cfg.opName == "" {
		return nil
	}
	b := binary.AppendUvarint(make([]byte, 0, 2+len(cfg.opName)+len(cfg.opInput)), uint64(len(cfg.opName)))
	return append(append(b, cfg.opName...), cfg.opInput...)
}

// decodeInput returns the name and input of a claim's payload, or false
// when it holds none.
func decodeInput(p []byte) (name string, input []byte, ok bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n == 0 || n > uint64(len(p)-k) {
		return "", nil, false
	}
	return string(p[k : k+int(n)]), p[k+int(n):], true
}

// Resume takes over the operation abandoned under storeKey (a key of this
// engine's Do space, as the completer package and `idemctl abandoned` list
// them) and finishes it with the function funcs registers for its name,
// given its stored input (see WithInput). It returns what Do would:
// the function's result once recorded, or its error.
//
// It returns an error wrapping ErrNotAbandoned when the key holds no
// operation whose lease has ended (none, a running one, a finished or
// released one, or one another caller resumed first), ErrNoInput for one
// claimed without WithInput, ErrNoFunction when funcs has no function for
// its name (nothing is claimed: the operation stays abandoned, for a
// completer that has it), ErrInvalid for a key outside this engine's Do
// space, or the store's error. The events of a resumed operation carry no
// key (the engine knows only its store key), so their KeyDigest is not
// the one its client's calls have.
func (e *Engine) Resume(ctx context.Context, storeKey string, funcs Funcs) (Result, error) {
	if !strings.HasPrefix(storeKey, e.prefix[spaceDo]) || ScopeOf(storeKey) == "" {
		return Result{}, fmt.Errorf("idemkit: %w: not a key of the engine's Do space", ErrInvalid)
	}
	cfg := &e.cfg
	ent, err := e.store.Get(ctx, storeKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Result{}, fmt.Errorf("%w: no record", ErrNotAbandoned)
	case err != nil:
		return Result{}, fmt.Errorf("idemkit: resume: %w", err)
	}
	prev, err := decodeRecord(ent.Value)
	if err != nil {
		return Result{}, fmt.Errorf("idemkit: resume: %w", err)
	}
	if ok, _ := takeable(&prev, ent); !ok || prev.state != stateInProgress {
		return Result{}, fmt.Errorf("%w: its lease runs, or it ended", ErrNotAbandoned)
	}
	name, input, ok := decodeInput(prev.payload)
	if !ok {
		return Result{}, ErrNoInput
	}
	fn := funcs[name]
	if fn == nil {
		return Result{}, fmt.Errorf("%w: %q", ErrNoFunction, name)
	}
	now := cfg.clock().UnixMilli()
	rec := record{state: stateInProgress, owner: e.newNonce(), created: now, updated: now,
		fingerprint: string(prev.fp), fence: fenceAfter(now, prev.fence), tail: prev.tail, payload: prev.payload, origin: prev.origin}
	enc := rec.encode()
	set, err := e.store.CompareAndSwap(ctx, storeKey, ent.Value, enc, e.claimTTL(cfg, time.Duration(rec.tail)*time.Millisecond))
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("idemkit: resume: %w", err)
	case !set:
		return Result{}, fmt.Errorf("%w: another caller took it over", ErrNotAbandoned)
	}
	c := e.claimOf(cfg, ModeDo, "", "", storeKey, rec, enc)
	c.admit(ctx)
	return c.run(ctx, func(ctx context.Context) ([]byte, error) { return fn(ctx, input) })
}
