// Package delivery decides what a queue consumer does with one delivery of
// a message, whatever the broker: acknowledge it, have it redelivered
// (after a delay), or drop it for good. The broker adapters
// (queue/idemnats, queue/idemamqp) map its verdicts onto their
// acknowledgements; this package holds the rules they share, so both
// brokers answer the same situation the same way.
package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// MaxNameLen is the longest consumer name, in bytes.
const MaxNameLen = 64

// Action is what the consumer does with a delivery.
type Action int

const (
	// Ack removes the message from the queue: it was processed now or
	// earlier (a replay), or processed without its result recorded.
	Ack Action = iota
	// Retry has the message delivered again after Verdict.Delay: a
	// transient failure, or another delivery of the key is in progress.
	Retry
	// Drop removes the message without success (JetStream Term, AMQP
	// reject without requeue, which dead-letters where configured): a
	// final failure, a message without a usable key, a key reused with
	// another payload.
	Drop
)

// String returns "ack", "retry" or "drop".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Verdict is the decision for one delivery.
type Verdict struct {
	Action Action
	// Delay is how long to wait before the redelivery (Retry only; 0 means
	// at once).
	Delay time.Duration
	// Ran reports that the handler ran for this delivery.
	Ran bool
	// Replayed reports that a recorded outcome answered: the handler did
	// not run.
	Replayed bool
	// Panicked reports that the effect panicked: Err is a *PanicError.
	Panicked bool
	// Exhausted reports that the effect failed on the last attempt
	// allowed (Config.Backoff.Attempts): the message is dropped, not
	// retried.
	Exhausted bool
	// Mismatch reports that the key was first seen with another payload
	// fingerprint: dropped under Config.RefuseMismatch, otherwise answered
	// by the key's record like any copy.
	Mismatch bool
	// Err is why the message was not acknowledged or, with Ack, why the
	// handler's result could not be recorded.
	Err error
}

// Func runs the effect of one message and returns the result to record.
type Func func(ctx context.Context) ([]byte, error)

// Config is what a Processor needs besides the engine.
type Config struct {
	// Codec, when set, is installed on the engine view: errors it marks
	// final are recorded, replayed and dropped.
	Codec idemkit.ErrorCodec
	// Final, when set, marks more errors final: they are dropped, but not
	// recorded (a later duplicate runs again).
	Final func(error) bool
	// Backoff sets the redelivery delays after a failure, and how many
	// attempts a failing effect gets.
	Backoff Backoff
	// RefuseMismatch drops a delivery whose key was first seen with
	// another fingerprint. Without it such a delivery is answered by the
	// key's record (acked as a replay) and reported with Verdict.Mismatch.
	RefuseMismatch bool
}

// Processor decides deliveries for one consumer. It is safe for concurrent
// use.
type Processor struct {
	e     *idemkit.Engine
	space string // "nats", "amqp": keeps each adapter's keys apart
	name  string
	cfg   Config
}

// New returns a Processor over e for the consumer name (1 to MaxNameLen
// bytes of printable ASCII) in the adapter's key space. engineOpts are
// validated once, with cfg.Codec when set. Errors wrap idemkit.ErrInvalid.
func New(e *idemkit.Engine, space, name string, cfg Config, engineOpts ...idemkit.Option) (*Processor, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil engine", idemkit.ErrInvalid)
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := cfg.Backoff.check(); err != nil {
		return nil, err
	}
	if cfg.Codec != nil {
		engineOpts = append(engineOpts, idemkit.WithErrorCodec(cfg.Codec))
	}
	view, err := e.With(engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("WithEngineOptions: %w", err)
	}
	return &Processor{e: view, space: space, name: name, cfg: cfg}, nil
}

// checkName refuses a consumer name that is empty, too long or not
// printable ASCII.
func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: name must have 1 to %d bytes, got %d", idemkit.ErrInvalid, MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return fmt.Errorf("%w: name %q is not printable ASCII without spaces", idemkit.ErrInvalid, name)
		}
	}
	return nil
}

// Request is one delivery: its message key (or the error finding it), its
// payload fingerprint, its attempt number and the effect to run.
type Request struct {
	Key         string
	KeyErr      error
	Fingerprint string
	// Attempt is the delivery's attempt number, from 1 (0 counts as 1):
	// the broker's delivery count, or the adapter's own.
	Attempt int
	Run     Func
}

// storeKey is the engine key of a message key: consumers of different
// names, and different adapters, never share keys.
func (p *Processor) storeKey(key string) string {
	return keying.Key(p.space, p.name, key)
}

// One decides one delivery: it claims the key, runs the effect when
// admitted and ends the claim.
func (p *Processor) One(ctx context.Context, r Request) Verdict {
	if v, bad := badKey(r); bad {
		return v
	}
	claim, res, err := p.e.Begin(ctx, p.storeKey(r.Key), r.Fingerprint)
	if claim == nil {
		return p.notAdmitted(ctx, r, res, err)
	}
	return p.run(ctx, claim, r)
}

// Batch decides many deliveries with one batch claim (one store call where
// the store is a store.Batcher), then runs the admitted effects in order.
// A key that appears twice in the batch runs once: a later copy of a
// message that ran with success is acked (even when its result could not
// be recorded), one of a message that failed is decided again (a run when
// the first released the key).
// decided is called with each verdict as soon as it is known, so the
// caller can acknowledge early messages while later ones run.
func (p *Processor) Batch(ctx context.Context, reqs []Request, decided func(i int, v Verdict)) {
	breqs, index := p.batchRequests(reqs, decided)
	if len(breqs) == 0 {
		return
	}
	outs, err := p.e.BeginBatch(ctx, breqs)
	if err != nil { // invalid options only; New validated them
		for _, i := range index {
			decided(i, Verdict{Action: Retry, Delay: p.cfg.Backoff.Delay(reqs[i].Attempt), Err: err})
		}
		return
	}
	defer func() { // a panicking effect must not leave later claims held
		for _, o := range outs {
			if o.Claim != nil {
				o.Claim.Release(ctx)
			}
		}
	}()
	seen := copies{admitted: make(map[string]bool), succeeded: make(map[string]string)}
	for n, o := range outs {
		i := index[n]
		decided(i, p.batchOne(ctx, reqs[i], o, seen))
	}
}

// copies is what a batch knows of the keys it has decided: those it was
// admitted to run, and those it ran with success (with the fingerprint).
type copies struct {
	admitted  map[string]bool
	succeeded map[string]string
}

// batchOne decides the delivery r of a batch, whose batch claim gave o.
func (p *Processor) batchOne(ctx context.Context, r Request, o idemkit.BatchOutcome, seen copies) Verdict {
	var v Verdict
	switch fp, ok := seen.succeeded[r.Key]; {
	case ok && fp == r.Fingerprint && (o.Claim != nil || o.Result.Unguarded || errors.Is(o.Err, idemkit.ErrInProgress)):
		// A copy of a message this batch has just run with success: the
		// work is done, even when its record could not be written (the
		// key released, or in progress until its lease ends) or the store
		// is down under FailOpen. A claim is released by Batch.
		v = Verdict{Action: Ack, Replayed: true}
	case o.Claim != nil:
		seen.admitted[r.Key] = true
		v = p.run(ctx, o.Claim, r)
	case seen.admitted[r.Key] && errors.Is(o.Err, idemkit.ErrInProgress):
		// A copy of a message this batch has just run and that failed:
		// ask again, so it runs now if the first released the key.
		v = p.One(ctx, r)
	default:
		v = p.notAdmitted(ctx, r, o.Result, o.Err)
	}
	if v.Ran && v.Action == Ack {
		seen.succeeded[r.Key] = r.Fingerprint
	}
	return v
}

// batchRequests returns the engine requests of the deliveries that have a
// key, and their positions in reqs; the others are decided at once.
func (p *Processor) batchRequests(reqs []Request, decided func(int, Verdict)) ([]idemkit.BatchRequest, []int) {
	breqs := make([]idemkit.BatchRequest, 0, len(reqs))
	index := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if v, bad := badKey(r); bad {
			decided(i, v)
			continue
		}
		breqs = append(breqs, idemkit.BatchRequest{Key: p.storeKey(r.Key), Fingerprint: r.Fingerprint})
		index = append(index, i)
	}
	return breqs, index
}

// badKey drops a delivery without a usable key: it can never be processed
// safely, and redelivering it would loop.
func badKey(r Request) (Verdict, bool) {
	switch {
	case r.KeyErr != nil:
		return Verdict{Action: Drop, Err: fmt.Errorf("%w: message key: %w", idemkit.ErrInvalid, r.KeyErr)}, true
	case r.Key == "":
		return Verdict{Action: Drop, Err: fmt.Errorf("%w: message has no key", idemkit.ErrInvalid)}, true
	}
	return Verdict{}, false
}

// run runs the effect of r under claim and ends the claim with its
// outcome. Once the effect has succeeded the message is acknowledged
// whatever happens to the record: running the effect again because the
// record could not be written is the duplicate the consumer exists to
// prevent. A panicking effect is a failed attempt: the claim is released,
// never recorded as a final failure.
func (p *Processor) run(ctx context.Context, claim *idemkit.Claim, r Request) Verdict {
	defer claim.Release(ctx) // no-op once ended
	// In the claim's context the effect may run Steps: a redelivery
	// resumes after the last one its first delivery recorded.
	value, err := call(claim.Context(ctx), r.Run)
	var pe *PanicError
	switch {
	case errors.As(err, &pe):
		return p.retry(err, true, r.Attempt)
	case err != nil:
		return p.failed(err, claim.Fail(ctx, err), r.Attempt)
	}
	return Verdict{Action: Ack, Ran: true, Err: claim.Complete(ctx, value)}
}

// failed decides after the effect failed with err; joined is err with any
// failure to record it.
func (p *Processor) failed(err, joined error, attempt int) Verdict {
	if p.final(err) {
		return Verdict{Action: Drop, Ran: true, Err: joined}
	}
	return p.retry(joined, true, attempt)
}

// retry has the delivery of the given attempt redelivered after its
// back-off delay, or, when the effect ran (and failed) on the last attempt
// allowed, dropped. A delivery whose effect did not run (the store failed)
// is retried whatever its attempt: the message is not at fault.
func (p *Processor) retry(err error, ran bool, attempt int) Verdict {
	var pe *PanicError
	v := Verdict{Action: Retry, Delay: p.cfg.Backoff.Delay(attempt), Ran: ran, Panicked: errors.As(err, &pe), Err: err}
	if ran && p.cfg.Backoff.Exhausted(attempt) {
		v.Action, v.Delay, v.Exhausted = Drop, 0, true
	}
	return v
}

// final reports whether err is final under the codec or the predicate.
func (p *Processor) final(err error) bool {
	if p.cfg.Codec != nil {
		if _, final := p.cfg.Codec.EncodeError(err); final {
			return true
		}
	}
	return p.cfg.Final != nil && p.cfg.Final(err)
}

// notAdmitted decides a delivery r the engine did not admit.
func (p *Processor) notAdmitted(ctx context.Context, r Request, res idemkit.Result, err error) Verdict {
	switch {
	case res.Replayed && err == nil:
		return Verdict{Action: Ack, Replayed: true}
	case res.Replayed && errors.Is(err, idemkit.ErrResultTooLarge):
		// The effect ran and succeeded; only its result was too large to
		// keep (the first delivery reported that). The work is done.
		return Verdict{Action: Ack, Replayed: true}
	case res.Replayed: // a recorded final failure
		return Verdict{Action: Drop, Replayed: true, Err: err}
	case res.Unguarded: // the store failed under FailOpen
		if _, ferr := call(ctx, r.Run); ferr != nil {
			var pe *PanicError
			if errors.As(ferr, &pe) || !p.final(ferr) {
				return p.retry(ferr, true, r.Attempt)
			}
			return Verdict{Action: Drop, Ran: true, Err: ferr}
		}
		return Verdict{Action: Ack, Ran: true}
	}
	if d, ok := idemkit.RetryAfter(err); ok && errors.Is(err, idemkit.ErrInProgress) {
		return Verdict{Action: Retry, Delay: d, Err: err}
	}
	if errors.Is(err, idemkit.ErrMismatch) {
		if p.cfg.RefuseMismatch {
			return Verdict{Action: Drop, Mismatch: true, Err: err}
		}
		return p.mismatched(ctx, r, err)
	}
	if errors.Is(err, idemkit.ErrInvalid) {
		return Verdict{Action: Drop, Err: err}
	}
	return p.retry(err, false, r.Attempt)
}

// mismatched decides a delivery whose key was first seen with another
// fingerprint, when that is not refused: the key's record answers it as
// it answers any copy (the engine does not, having refused it), and the
// verdict reports the mismatch. A record without a fingerprint (written
// before fingerprints were taken) is no mismatch.
func (p *Processor) mismatched(ctx context.Context, r Request, err error) Verdict {
	info, ierr := p.e.Inspect(ctx, idemkit.ModeDo, p.storeKey(r.Key))
	if ierr != nil { // released or expired meanwhile, or the store failed: ask again
		return Verdict{Action: Retry, Delay: p.cfg.Backoff.Delay(r.Attempt), Mismatch: true, Err: errors.Join(err, ierr)}
	}
	v := Verdict{Mismatch: info.FingerprintDigest != ""}
	switch info.State {
	case idemkit.StateCompleted, idemkit.StateTooLarge:
		v.Action, v.Replayed = Ack, true
	case idemkit.StateFailed:
		v.Action, v.Replayed, v.Err = Drop, true, err
	default: // in progress
		v.Action, v.Delay, v.Err = Retry, min(max(info.TTL, time.Millisecond), p.cfg.Backoff.Delay(1)), err
	}
	return v
}
