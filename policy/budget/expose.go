package budget

import (
	"context"
	"time"

	"github.com/idemkit/idemkit/store"
)

// closeFunc, pingFunc and valueFunc turn functions into the optional store
// interfaces, so a wrapper can expose exactly the capabilities of the
// store it wraps.
type closeFunc func() error

func (f closeFunc) Close() error { return f() }

type pingFunc func(ctx context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

type valueFunc func(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error)

func (f valueFunc) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return f(ctx, key, value, ttl)
}

// Wrapper types, one per combination of optional interfaces.
type (
	withCloser struct {
		store.Store
		closeFunc
	}
	withPinger struct {
		store.Store
		pingFunc
	}
	withBoth struct {
		store.Store
		closeFunc
		pingFunc
	}
	withValuer struct {
		store.Store
		valueFunc
	}
	withCloserValuer struct {
		store.Store
		closeFunc
		valueFunc
	}
	withPingerValuer struct {
		store.Store
		pingFunc
		valueFunc
	}
	withAll struct {
		store.Store
		closeFunc
		pingFunc
		valueFunc
	}
)

// expose returns w extended with Close, Ping and SetNXValue exactly when
// inner implements store.Closer, store.Pinger and store.SetNXValuer: a
// type assertion on the result answers as it would on inner. close, ping
// and value implement the methods.
func expose(w, inner store.Store, close closeFunc, ping pingFunc, value valueFunc) store.Store {
	_, c := inner.(store.Closer)
	_, p := inner.(store.Pinger)
	_, v := inner.(store.SetNXValuer)
	switch {
	case c && p && v:
		return withAll{w, close, ping, value}
	case c && p:
		return withBoth{w, close, ping}
	case c && v:
		return withCloserValuer{w, close, value}
	case p && v:
		return withPingerValuer{w, ping, value}
	case c:
		return withCloser{w, close}
	case p:
		return withPinger{w, ping}
	case v:
		return withValuer{w, value}
	}
	return w
}

type valueResult struct {
	set      bool
	existing []byte
}
