package idemkit

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit/store"
)

// claimKey is the context key under which Do hands fn its claim.
type claimKey struct{}

// claimCtx is fn's context: its parent (cancelled when the lease is lost,
// see run) carrying the claim under claimKey. It lives in the Claim, so
// handing it to fn allocates nothing.
type claimCtx struct {
	context.Context
	c *Claim
}

// Value returns the claim for claimKey, else the parent's value.
func (x *claimCtx) Value(key any) any {
	if key == (claimKey{}) {
		return x.c
	}
	return x.Context.Value(key)
}

// ClaimFromContext returns the claim of the Do call whose fn received ctx
// (or a context derived from it), or nil outside such a call. fn uses it
// to complete the claim in its own database transaction: call CompleteIn
// with a store view bound to the transaction, then commit. Do sees that fn
// completed the claim and does not complete it again; see CompleteIn for
// what Do returns then.
func ClaimFromContext(ctx context.Context) *Claim {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	return c
}

// CompleteIn completes the claim of the typed Do call whose fn received
// ctx, recording v (encoded with the engine's Codec, as Do would) through
// s, a view of the engine's store bound to fn's transaction, so the record
// commits or rolls back with fn's business write. Commit after it returns
// nil; roll back when it returns an error: ErrLeaseLost (another caller
// owns the key now, and a stale owner must not commit), ErrInvalid
// (outside a Do call's fn, or the Codec cannot encode v) or
// ErrResultTooLarge (the encoded v is over the size cap). With the untyped
// (*Engine).Do, call ClaimFromContext(ctx).CompleteIn with the bytes
// instead. See the package documentation, section "Completing inside a
// transaction", for what Do returns then.
func CompleteIn[T any](ctx context.Context, s store.Store, v T) error {
	c := ClaimFromContext(ctx)
	if c == nil {
		return fmt.Errorf("idemkit: %w: CompleteIn outside the fn of a Do call", ErrInvalid)
	}
	b, err := c.cfg.codec.Marshal(v)
	if err != nil {
		return fmt.Errorf("idemkit: %w: encode result: %w", ErrInvalid, err)
	}
	return c.CompleteIn(ctx, s, b)
}
