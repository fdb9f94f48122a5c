package idemkit

import (
	"bytes"
	"context"
	"errors"

	"github.com/idemkit/idemkit/store"
)

// BatchRequest is one execution of a batch: the key and fingerprint Begin
// would take.
type BatchRequest struct {
	Key         string
	Fingerprint string
}

// BatchOutcome is what Begin would have returned for one BatchRequest:
// a claim to run and end, a replayed or unguarded Result, or an error
// (ErrInProgress, ErrMismatch, ErrUnavailable, ...).
type BatchOutcome struct {
	Claim  *Claim
	Result Result
	Err    error
}

// BeginBatch begins many executions at once, for queue consumers that
// fetch messages in batches: each request is admitted, replayed or
// refused individually, exactly as Begin decides. When the store can claim
// many keys in one call (store.Batcher) the batch costs one call;
// otherwise the requests are claimed one by one. A key that appears twice
// is admitted once; its later occurrences get ErrInProgress. WithWait does
// not apply: a request whose key is in progress gets ErrInProgress. The
// returned error is for invalid options only; outcomes carry the rest.
func (e *Engine) BeginBatch(ctx context.Context, reqs []BatchRequest, opts ...Option) ([]BatchOutcome, error) {
	cfg, scope, err := e.callConfigFor("BeginBatch", batchOpts, opts)
	if err != nil {
		return nil, err
	}
	out := make([]BatchOutcome, len(reqs))
	claims := make([]*Claim, len(reqs))
	items := make([]store.BatchItem, 0, len(reqs))
	index := make([]int, 0, len(reqs)) // item -> request
	fps := make([]string, len(reqs))   // what the records keep of the fingerprints
	for i, r := range reqs {
		sk, err := e.storeKey(cfg, scope, spaceDo, r.Key)
		if err != nil {
			out[i].Err = err
			continue
		}
		fps[i] = e.keys.storedFingerprint(r.Fingerprint)
		claims[i] = e.newClaim(cfg, ModeDo, scope, r.Key, sk, fps[i], e.doTail(cfg))
		items = append(items, store.BatchItem{Key: sk, Value: claims[i].enc, TTL: e.claimTTL(cfg, e.doTail(cfg))})
		index = append(index, i)
	}
	b, ok := e.store.(store.Batcher)
	if !ok {
		for _, i := range index {
			out[i] = e.beginOne(ctx, cfg, claims[i], fps[i])
		}
		return out, nil
	}
	results, err := b.SetNXBatch(ctx, items)
	if err == nil && len(results) != len(items) {
		err = store.Unavailable("setnx batch", errors.New("the store answered for a different number of items"))
	}
	for n, i := range index {
		c := claims[i]
		if err != nil {
			out[i] = e.batchFailed(ctx, cfg, c, err)
			continue
		}
		r := results[n]
		if r.Set || bytes.Equal(r.Existing.Value, c.enc) {
			out[i] = e.admitted(ctx, cfg, c)
			continue
		}
		out[i] = e.found(ctx, cfg, c, fps[i], r.Existing)
	}
	return out, nil
}

// beginOne claims one request of a batch with SetNX.
func (e *Engine) beginOne(ctx context.Context, cfg *config, c *Claim, fingerprint string) BatchOutcome {
	set, existing, err := e.claim(ctx, cfg, ModeDo, c.scope, c.key, c.sk, c.enc, e.claimTTL(cfg, e.doTail(cfg)))
	switch {
	case err != nil:
		run, err := e.storeFailed(ctx, cfg, ModeDo, c.scope, c.key, "claim", err)
		return BatchOutcome{Result: Result{Unguarded: run}, Err: err}
	case set:
		return e.admitted(ctx, cfg, c)
	}
	return e.found(ctx, cfg, c, fingerprint, existing)
}

// found decides a batch request whose key holds existing: c takes it over
// when it is a released claim or one whose lease has ended (once; a key
// that changed meanwhile is claimed again with SetNX), or the request gets
// what a caller of Begin would.
func (e *Engine) found(ctx context.Context, cfg *config, c *Claim, fingerprint string, existing store.Entry) BatchOutcome {
	enc, retry, err := e.takeover(ctx, cfg, ModeDo, c.scope, c.key, c.sk, &existing, &c.rec)
	switch {
	case err != nil:
		run, err := e.storeFailed(ctx, cfg, ModeDo, c.scope, c.key, "claim", err)
		return BatchOutcome{Result: Result{Unguarded: run}, Err: err}
	case enc != nil:
		c.enc = enc
		return e.admitted(ctx, cfg, c)
	case retry:
		return e.beginOne(ctx, cfg, c, fingerprint)
	}
	res, err, again := e.existing(ctx, cfg, ModeDo, c.scope, c.key, fingerprint, existing)
	if again { // in progress, under WithWait
		err = e.inProgress(ctx, cfg, c.scope, c.key, existing, ModeDo)
	}
	return BatchOutcome{Result: res, Err: err}
}

// admitted starts the heartbeat of a claim a batch won.
func (e *Engine) admitted(ctx context.Context, cfg *config, c *Claim) BatchOutcome {
	c.admit(ctx)
	c.startHeartbeat(ctx, nil)
	return BatchOutcome{Claim: c}
}

// batchFailed handles a batch call that failed: any claim it may have
// applied is undone, then the failure policy decides for the request.
func (e *Engine) batchFailed(ctx context.Context, cfg *config, c *Claim, err error) BatchOutcome {
	if !errors.Is(err, store.ErrInvalid) {
		if undone, uerr := e.store.CompareAndDelete(detach(ctx), c.sk, c.enc); undone || uerr != nil {
			e.observe(ctx, cfg, Event{Kind: EventAmbiguous, Mode: ModeDo, Key: c.key, scope: c.scope, Err: errors.Join(err, uerr)})
		}
	}
	run, err := e.storeFailed(ctx, cfg, ModeDo, c.scope, c.key, "claim batch", err)
	return BatchOutcome{Result: Result{Unguarded: run}, Err: err}
}
