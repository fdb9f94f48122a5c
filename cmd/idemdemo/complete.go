package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/store"
)

// The completer: paid orders abandoned mid-way (the demo that placed one
// crashed, or was paused past its lease, and the client never retried)
// are finished in the background, every -complete-every, once placed at
// least -complete-after ago. POST /orders/paid stores each request with
// its claim (idemhttp.WithResume); the completer takes the order over
// with a larger fencing token and serves the stored request again
// (idemhttp.Resumer): its finished steps are skipped, the first
// unfinished one runs again with the same derived key, and the answer is
// recorded for the client's late retry. Several demos on one store may
// each run one: an order is taken over by one of them.

// paidOrderOp is the operation name POST /orders/paid stores its requests
// under.
const paidOrderOp = "paid-order"

// completion is what the completer needs from the app: its engine and the
// functions that resume each operation by name.
type completion struct {
	engine *idemkit.Engine
	funcs  idemkit.Funcs
}

// startCompleter runs the completer over be's store in the background
// (when cfg asks for one and the store can list its keys) and returns the
// function that stops it and waits for its pass to end, or nil.
func startCompleter(c completion, be *backend, cfg config, log *slog.Logger) func() {
	if cfg.completeEvery == 0 || c.engine == nil {
		return nil
	}
	sc, ok := be.store.(store.Scanner)
	if !ok {
		log.Warn("completer off: the store cannot list its keys")
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = completer.Run(ctx, c.engine, sc, c.funcs, cfg.completeEvery,
			completer.WithOlderThan(cfg.completeAfter),
			completer.WithPasses(func(r completer.Resumed, err error) {
				be.tel.Completer.Pass(r, err)
				if err != nil {
					log.Warn("completer: pass failed", "error", err)
				}
			}),
			completer.WithOutcomes(func(o completer.Outcome) {
				be.tel.Completer.Outcome(o)
				sum := sha256.Sum256([]byte(o.StoreKey)) // the store key may hold a readable key
				level := slog.LevelInfo
				if k := o.Kind(); k == completer.KindFailed || k == completer.KindReported || k == completer.KindError {
					level = slog.LevelWarn
				}
				log.Log(ctx, level, "completer: abandoned order", "outcome", o.Kind().String(),
					"order", hex.EncodeToString(sum[:8]), "age", o.Age, "steps", o.Steps, "fence", o.Fence, "error", o.Err)
			}))
	}()
	return func() {
		cancel()
		<-done
	}
}
