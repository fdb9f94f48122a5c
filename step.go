package idemkit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/idemkit/idemkit/store"
)

// Recovery points.
//
// An operation that calls other systems (reserve stock, charge a card,
// mark the order paid) is split into named steps. Step runs a step's
// function at most once to success per operation and records its result
// under the operation's key; a retry of the operation, after a crash, a
// pause or a takeover, gets each recorded result back without running the
// step again, and runs the first unfinished step anew. A step that calls
// a system which honours an idempotency key sends StepKey, which is the
// same on every run of the step, so that system drops a call the step
// makes twice; with the claim's fencing token (FenceFromContext) it can
// also refuse a caller that lost the operation.

// MaxStepNameLen is the longest step name Step takes, in bytes.
const MaxStepNameLen = 128

var (
	// ErrNoOperation is returned by Step called outside the work of a
	// keyed operation (Do's fn, the typed Do's fn, UseToken's fn, or a
	// context from Claim.Context).
	ErrNoOperation = errors.New("idemkit: step outside a keyed operation")
	// ErrStepMismatch is returned by Step when one run of an operation
	// uses one step name for two steps: it calls Step with that name from
	// two places in the program.
	ErrStepMismatch = errors.New("idemkit: step name reused with a different function")
)

// stepKeyCtx is the context key of a running step.
type stepKeyCtx struct{}

// stepRun is a running step, in its function's context.
type stepRun struct {
	c   *Claim
	sk  string // the step's store key
	rec record // the record the step writes, but for its payload

	mu   sync.Mutex
	inTx bool // RecordStepIn wrote the record through a transaction
}

// steps is what a claim knows of the steps its work ran: where each name
// was called from, so that one name used for two different steps is
// caught.
type steps struct {
	mu    sync.Mutex
	sites map[string]uintptr // the return address of the call to Step
	done  map[string]stepResult
}

// stepResult is what a step the run already ended gives every later call.
type stepResult struct {
	value []byte
	err   error
}

// stepEnded returns the result of the step name when this run ended it.
func (c *Claim) stepEnded(name string) (stepResult, bool) {
	c.steps.mu.Lock()
	defer c.steps.mu.Unlock()
	r, ok := c.steps.done[name]
	return r, ok
}

// stepEnd notes the result of the step name for the rest of the run, and
// returns it.
func (c *Claim) stepEnd(name string, value []byte, err error) ([]byte, error) {
	c.steps.mu.Lock()
	defer c.steps.mu.Unlock()
	if c.steps.done == nil {
		c.steps.done = map[string]stepResult{}
	}
	c.steps.done[name] = stepResult{value, err}
	return value, err
}

// Context returns ctx carrying the claim, as Do gives fn: Step,
// FenceFromContext and ClaimFromContext then work in it. It is for work
// run under a claim from Begin or BeginBatch.
func (c *Claim) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// Step runs fn as the step called name of the operation whose work
// received ctx, at most once to success per operation: when an earlier
// run of the operation recorded the step's result, Step returns it and
// fn does not run; otherwise fn runs, and its result is recorded before
// Step returns it. A failed fn records nothing, so a retry of the
// operation runs the step again. fn's context carries the step's derived
// key (StepKey) and the claim's fencing token (FenceFromContext).
//
// A result over the size cap (WithMaxResultSize) is not recorded: the
// step keeps a terminal record, and this and every later run of the step
// get an error wrapping ErrResultTooLarge (with the value, this once).
// Step returns ErrNoOperation outside an operation, an error wrapping
// ErrInvalid for an empty name, one over MaxStepNameLen bytes or one that
// is not printable UTF-8, ErrStepMismatch for a name this run of the
// operation also called Step with from another line of the program (a
// step name is the step's identity across runs: give each step its own
// name, and keep it when the code changes), ErrLeaseLost when the operation's lease was lost (nothing is
// recorded), or the store's error. Step names are kept in the store only
// as digests.
func Step(ctx context.Context, name string, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	c := ClaimFromContext(ctx)
	if c == nil {
		return nil, ErrNoOperation
	}
	if err := checkStepName(name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("idemkit: %w: nil step function", ErrInvalid)
	}
	var pc [1]uintptr
	runtime.Callers(2, pc[:]) // the line that called Step
	if err := c.stepFunc(name, pc[0]); err != nil {
		return nil, err
	}
	if r, ok := c.stepEnded(name); ok {
		return r.value, r.err
	}
	sk := c.stepStoreKey(name)
	s := c.e.store
	// A claim that began its operation finds no step recorded before it:
	// only one that carries an earlier claim's lineage reads.
	if !c.fresh() {
		ent, err := s.Get(ctx, sk)
		switch {
		case err == nil:
			v, err := stepRecorded(name, ent.Value)
			return c.stepEnd(name, v, err)
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("idemkit: read step: %w", err)
		}
	}
	rec := record{state: stateDone, owner: c.rec.owner, fence: c.rec.fence}
	now := c.cfg.clock().UnixMilli()
	rec.created, rec.updated = now, now
	run := &stepRun{c: c, sk: sk, rec: rec}
	v, err := fn(context.WithValue(ctx, stepKeyCtx{}, run))
	if run.recordedInTx() {
		v, err := run.afterTx(ctx, name, v, err)
		if err != nil {
			return v, err
		}
		return c.stepEnd(name, v, nil)
	}
	if err != nil {
		return v, err
	}
	if c.hb.isLost() {
		return v, ErrLeaseLost
	}
	rec.payload = v
	var tooLarge error
	if len(v) > c.cfg.maxResult || rec.encodedLen(len(v)) > store.MaxValueLen {
		tooLarge = fmt.Errorf("%w: step %q: %d bytes, cap %d", ErrResultTooLarge, name, len(v), c.cfg.maxResult)
		rec.state, rec.payload = stateTooLarge, sizePayload(len(v))
	}
	set, existing, err := s.SetNX(detach(ctx), sk, rec.encode(), c.cfg.retention)
	switch {
	case err != nil:
		return v, errors.Join(tooLarge, fmt.Errorf("idemkit: record step: %w", err))
	case !set:
		// Another run of the operation recorded the step meanwhile (one
		// that lost its lease to this one, say): its result stands.
		v, err := stepRecorded(name, existing.Value)
		return c.stepEnd(name, v, err)
	}
	if tooLarge != nil {
		return v, c.endTooLarge(name, tooLarge)
	}
	return c.stepEnd(name, v, nil)
}

// endTooLarge notes that the step name's result was too large: later
// calls in the run get the error, not the value.
func (c *Claim) endTooLarge(name string, err error) error {
	_, err = c.stepEnd(name, nil, err)
	return err
}

// RecordStepIn records value as the result of the step whose function
// received ctx, through s, a view of the engine's store bound to the
// caller's transaction (such as a SQL store's transaction view), so that
// the step's recovery point commits or rolls back with the step's local
// writes. Call it last in the transaction, then commit. Step then reads
// the key once: a committed record is the step's result; no record means
// the transaction rolled back, and Step returns fn's error, or an error
// saying the record was not committed.
//
// It returns ErrNoOperation outside a step, an error wrapping
// ErrResultTooLarge for a value over the size cap (record nothing; roll
// back), ErrLeaseLost when the operation's lease was lost, or the
// store's error; an error wrapping ErrLeaseLost too when another run of
// the operation recorded the step first: roll back, and Step returns that
// run's result.
func RecordStepIn(ctx context.Context, s store.Store, value []byte) error {
	run, ok := ctx.Value(stepKeyCtx{}).(*stepRun)
	if !ok {
		return ErrNoOperation
	}
	if s == nil {
		return fmt.Errorf("idemkit: %w: nil transaction store", ErrInvalid)
	}
	c := run.c
	if c.hb.isLost() {
		return ErrLeaseLost
	}
	rec := run.rec
	rec.payload = value
	if len(value) > c.cfg.maxResult || rec.encodedLen(len(value)) > store.MaxValueLen {
		return fmt.Errorf("%w: %d bytes, cap %d", ErrResultTooLarge, len(value), c.cfg.maxResult)
	}
	run.mu.Lock()
	run.inTx = true
	run.mu.Unlock()
	set, _, err := s.SetNX(ctx, run.sk, rec.encode(), c.cfg.retention)
	switch {
	case err != nil:
		return fmt.Errorf("idemkit: record step: %w", err)
	case !set:
		return fmt.Errorf("%w: another run of the operation recorded the step first", ErrLeaseLost)
	}
	return nil
}

// recordedInTx reports whether the step's function called RecordStepIn.
func (r *stepRun) recordedInTx() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inTx
}

// afterTx ends a step whose function recorded it through a transaction,
// once the function has returned v and err: the key holds the step's
// record when the transaction committed (or another run's, which stands).
func (r *stepRun) afterTx(ctx context.Context, name string, v []byte, err error) ([]byte, error) {
	ent, gerr := r.c.e.store.Get(detach(ctx), r.sk)
	switch {
	case gerr == nil:
		return stepRecorded(name, ent.Value)
	case !errors.Is(gerr, store.ErrNotFound):
		return v, errors.Join(err, fmt.Errorf("idemkit: read step: %w", gerr))
	case err == nil:
		err = fmt.Errorf("idemkit: step %q: its transaction did not commit its record", name)
	}
	return v, err
}

// StepKey returns the derived key of the step whose function received ctx
// (see Step), and false outside a step. It is the same on every run of
// the step of one operation, different for every other step or operation,
// and reveals neither the operation's key nor its scope: send it as the
// idempotency key of the call the step makes to another system.
func StepKey(ctx context.Context) (string, bool) {
	r, ok := ctx.Value(stepKeyCtx{}).(*stepRun)
	if !ok {
		return "", false
	}
	return stepKey(r.sk), true
}

// stepRecorded returns the result recorded in value for the step name.
func stepRecorded(name string, value []byte) ([]byte, error) {
	rec, err := decodeRecord(value)
	if err != nil {
		return nil, fmt.Errorf("idemkit: step record: %w", err)
	}
	switch rec.state {
	case stateDone:
		return rec.payload, nil
	case stateTooLarge:
		return nil, fmt.Errorf("step %q: %w", name, tooLargeReplay(rec.payload))
	}
	return nil, fmt.Errorf("idemkit: step record: %w: state %d", store.ErrCorrupt, rec.state)
}

// stepFunc notes that this run called the step name from the call site
// pc, and refuses a name called from another site before.
func (c *Claim) stepFunc(name string, pc uintptr) error {
	c.steps.mu.Lock()
	defer c.steps.mu.Unlock()
	if c.steps.sites == nil {
		c.steps.sites = map[string]uintptr{}
	}
	if prev, ok := c.steps.sites[name]; ok && prev != pc {
		return fmt.Errorf("%w: step %q is called at %s and at %s", ErrStepMismatch, name, callSite(prev), callSite(pc))
	}
	c.steps.sites[name] = pc
	return nil
}

// stepStoreKey is the store key of the step name of c's operation:
// <namespace>:s:<scope>:<the operation's key digest>.<lineage>.<name
// digest>. The lineage (the operation's, carried over its takeovers)
// keeps an operation forgotten and run again from finding the steps of
// its earlier run.
func (c *Claim) stepStoreKey(name string) string {
	prefix := c.e.prefix[spaceDo]
	sum := sha256.Sum256([]byte(name))
	var lineage [8]byte
	binary.BigEndian.PutUint64(lineage[:], c.rec.origin)
	return c.cfg.namespace + ":s:" + c.sk[len(prefix):] + "." + hex.EncodeToString(lineage[:]) + "." +
		base64.RawURLEncoding.EncodeToString(sum[:12])
}

// stepKey derives a step's key from its store key, itself derived from
// the operation's key (keyed with the engine's secret, when set) and the
// step's name.
func stepKey(storeKey string) string {
	sum := sha256.Sum256([]byte("idemkit step key\x00" + storeKey))
	return base64.RawURLEncoding.EncodeToString(sum[:24])
}

// checkStepName refuses an empty name, one over MaxStepNameLen bytes, and
// one that is not printable UTF-8.
func checkStepName(name string) error {
	if name == "" || len(name) > MaxStepNameLen || !utf8.ValidString(name) {
		return fmt.Errorf("idemkit: %w: a step name has 1 to %d bytes of UTF-8", ErrInvalid, MaxStepNameLen)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("idemkit: %w: a step name must be printable", ErrInvalid)
		}
	}
	return nil
}

// callSite names the line of the call whose return address is pc.
func callSite(pc uintptr) string {
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	if f.File == "" {
		return "an unknown line"
	}
	return f.File + ":" + strconv.Itoa(f.Line)
}
