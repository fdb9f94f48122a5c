package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idemkit/store"
)

// ctxCases check operations under a context that is already done. A store
// may still perform the operation (an in-memory store need not look at
// ctx), but if it reports an error the error wraps ctx.Err() and nothing
// changed. For a passed deadline the error also wraps ErrUnavailable.
func ctxCases() []testCase {
	return []testCase{
		{name: "Context/Cancelled", f: func(c *checker, s store.Store) {
			ctx, cancel := context.WithCancel(c.ctx)
			cancel()
			testDoneCtx(c, s, ctx)
		}},
		{name: "Context/DeadlineExceeded", f: func(c *checker, s store.Store) {
			ctx, cancel := context.WithDeadline(c.ctx, time.Now().Add(-time.Second))
			defer cancel()
			testDoneCtx(c, s, ctx)
		}},
	}
}

// ctxErr checks that a failed operation under a done ctx reports ctx.Err()
// (and ErrUnavailable for a deadline), and returns whether it failed.
func (c *checker) ctxErr(ctx context.Context, err error, op string) (failed bool) {
	if err == nil {
		return false
	}
	if c.isErr(err, ctx.Err(), ruleCtx, op+" under a done context") && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.isErr(err, store.ErrUnavailable, ruleCtx, op+" past its deadline")
	}
	return true
}

func testDoneCtx(c *checker, s store.Store, ctx context.Context) {
	for _, k := range []string{"get", "cas", "cad", "consume"} {
		if !c.set(s, k, []byte("v"), longTTL) {
			return
		}
	}
	doneSetNX(c, s, ctx)
	doneGet(c, s, ctx)
	doneCAS(c, s, ctx)
	doneCAD(c, s, ctx)
	doneConsume(c, s, ctx)
}

func doneSetNX(c *checker, s store.Store, ctx context.Context) {
	set, _, err := s.SetNX(ctx, "nx", []byte("v"), longTTL)
	if c.ctxErr(ctx, err, "SetNX") {
		c.absent(s, "nx", ruleCtx)
		return
	}
	if c.expect(set, ruleSetNX, `SetNX("nx") of an absent key under a done context succeeded without setting`) {
		c.holds(s, "nx", []byte("v"), ruleSetNX)
	}
}

func doneGet(c *checker, s store.Store, ctx context.Context) {
	e, err := s.Get(ctx, "get")
	if !c.ctxErr(ctx, err, "Get") &&
		c.expect(string(e.Value) == "v", ruleGet, `Get("get") under a done context = %q, want "v"`, e.Value) {
		c.validTTL(e.TTL, `Get("get") under a done context`)
	}
	c.holds(s, "get", []byte("v"), ruleGet)
}

func doneCAS(c *checker, s store.Store, ctx context.Context) {
	ok, err := s.CompareAndSwap(ctx, "cas", []byte("v"), []byte("w"), longTTL)
	if c.ctxErr(ctx, err, "CompareAndSwap") {
		c.holds(s, "cas", []byte("v"), ruleCtx)
		return
	}
	if c.expect(ok, ruleCAS, `CompareAndSwap("cas") under a done context succeeded without swapping`) {
		c.holds(s, "cas", []byte("w"), ruleCAS)
	}
}

func doneCAD(c *checker, s store.Store, ctx context.Context) {
	ok, err := s.CompareAndDelete(ctx, "cad", []byte("v"))
	if c.ctxErr(ctx, err, "CompareAndDelete") {
		c.holds(s, "cad", []byte("v"), ruleCtx)
		return
	}
	if c.expect(ok, ruleCAD, `CompareAndDelete("cad") under a done context succeeded without deleting`) {
		c.absent(s, "cad", ruleCAD)
	}
}

func doneConsume(c *checker, s store.Store, ctx context.Context) {
	v, err := s.Consume(ctx, "consume")
	if c.ctxErr(ctx, err, "Consume") {
		c.holds(s, "consume", []byte("v"), ruleCtx)
		return
	}
	if c.expect(string(v) == "v", ruleConsume, `Consume("consume") under a done context = %q, want "v"`, v) {
		c.absent(s, "consume", ruleConsume)
	}
}
