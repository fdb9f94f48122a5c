package idemkit

import (
	"context"
	"fmt"
)

// Do is the typed form of (*Engine).Do: fn's result is encoded with the
// engine's Codec (JSON by default, see WithCodec) and a replay decodes it.
// The first execution returns fn's value itself; a replay returns the
// decoded copy, so fields the codec does not carry are lost on replay.
// fn's context is the one (*Engine).Do gives: cancelled with cause
// ErrLeaseLost when the lease is lost.
func Do[T any](ctx context.Context, e *Engine, key, fingerprint string, fn func(context.Context) (T, error), opts ...Option) (T, Result, error) {
	var zero T
	cfg, _, err := e.callConfig(opts)
	if err != nil {
		return zero, Result{}, err
	}
	var out T
	res, err := e.Do(ctx, key, fingerprint, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		out = v
		return cfg.codec.Marshal(v)
	}, opts...)
	switch {
	case res.Replayed && res.Value != nil:
		var v T
		if uerr := cfg.codec.Unmarshal(res.Value, &v); uerr != nil {
			return zero, res, fmt.Errorf("idemkit: decode stored result: %w", uerr)
		}
		return v, res, err
	case res.Value == nil && !res.Unguarded:
		return zero, res, err // fn failed, or a final error was replayed
	default:
		return out, res, err
	}
}
