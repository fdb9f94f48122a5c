package policy

import (
	"context"
	"sync"

	"github.com/idemkit/idemkit/store"
)

// closeFunc and pingFunc turn functions into the optional store interfaces,
// so a wrapper can expose exactly the capabilities of the store it wraps.
type closeFunc func() error

func (f closeFunc) Close() error { return f() }

type pingFunc func(ctx context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

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
)

// expose returns w extended with Close and Ping exactly when inner
// implements store.Closer and store.Pinger: a type assertion on the result
// answers as it would on inner. close and ping implement the methods.
func expose(w, inner store.Store, close closeFunc, ping pingFunc) store.Store {
	_, c := inner.(store.Closer)
	_, p := inner.(store.Pinger)
	switch {
	case c && p:
		return withBoth{w, close, ping}
	case c:
		return withCloser{w, close}
	case p:
		return withPinger{w, ping}
	}
	return w
}

// onceCloser closes s, if it is a store.Closer, on the first call to Close;
// later calls return the first call's result.
type onceCloser struct {
	once sync.Once
	s    store.Store
	err  error
}

func (c *onceCloser) Close() error {
	c.once.Do(func() { c.err = closeStore(c.s) })
	return c.err
}
