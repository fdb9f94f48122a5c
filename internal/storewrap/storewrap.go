// Package storewrap holds the one rule by which a store wrapper (a
// store.Store that calls another) exposes the optional interfaces of
// package store: a wrapper is a store.Closer, store.Pinger,
// store.SetNXValuer, store.Batcher or store.Scanner exactly when the store
// it wraps is, found by type assertion, as database/sql/driver's wrappers
// do. So a type assertion on the wrapper answers as it would on the
// wrapped store: the engine claims, batches and pings as it would without
// the wrapper, and a health check never takes a store that cannot ping for
// one that answers. A wrapper over several stores documents which of
// their capabilities it offers and passes that set to Build.
//
// Build chooses, once per wrapper, one of 32 struct types (one per set of
// capabilities, written out by gen.go), each embedding the wrapper's core
// store.Store and the functions that implement the chosen methods.
package storewrap

//go:generate go run gen.go

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// Caps is a set of optional store interfaces.
type Caps uint8

// The optional interfaces of package store.
const (
	Closer  Caps = 1 << iota // store.Closer
	Pinger                   // store.Pinger
	Valuer                   // store.SetNXValuer
	Batcher                  // store.Batcher
	Scanner                  // store.Scanner

	// All is every optional interface.
	All = Closer | Pinger | Valuer | Batcher | Scanner
)

// Of returns the optional interfaces s implements.
func Of(s store.Store) Caps {
	var c Caps
	if _, ok := s.(store.Closer); ok {
		c |= Closer
	}
	if _, ok := s.(store.Pinger); ok {
		c |= Pinger
	}
	if _, ok := s.(store.SetNXValuer); ok {
		c |= Valuer
	}
	if _, ok := s.(store.Batcher); ok {
		c |= Batcher
	}
	if _, ok := s.(store.Scanner); ok {
		c |= Scanner
	}
	return c
}

var capNames = [...]string{"Closer", "Pinger", "SetNXValuer", "Batcher", "Scanner"}

// String lists the interfaces of c, joined by "+", or "none".
func (c Caps) String() string {
	var names []string
	for i, n := range capNames {
		if c&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "+")
}

// Methods implement the optional interfaces of a wrapper. Build uses those
// its Caps name; each must then be set.
type Methods struct {
	Close      func() error
	Ping       func(ctx context.Context) error
	SetNXValue func(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error)
	SetNXBatch func(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error)
	Scan       func(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error
}

// Build returns core extended with the optional interfaces caps names,
// implemented by m, and with no other: a type assertion for one of them on
// the result succeeds exactly when caps names it. core itself must
// implement none of them (its methods would show through). Build panics
// when caps names a method m does not set: that is a wrapper's bug.
func Build(core store.Store, caps Caps, m Methods) store.Store {
	for i, missing := range []bool{m.Close == nil, m.Ping == nil, m.SetNXValue == nil, m.SetNXBatch == nil, m.Scan == nil} {
		if caps&(1<<i) != 0 && missing {
			panic("storewrap: " + capNames[i] + " requested without its method")
		}
	}
	return build(core, caps, m)
}

// Core returns the store a wrapper built by Build extends, or s when s
// was not built by Build.
func Core(s store.Store) store.Store {
	if w, ok := s.(wrapper); ok {
		return w.core()
	}
	return s
}

// wrapper is implemented by every type Build returns.
type wrapper interface{ core() store.Store }

// The function types that give a wrapper one optional method each.
type (
	closeFunc func() error
	pingFunc  func(ctx context.Context) error
	valueFunc func(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error)
	batchFunc func(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error)
	scanFunc  func(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error
)

// Close implements store.Closer.
func (f closeFunc) Close() error { return f() }

// Ping implements store.Pinger.
func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

// SetNXValue implements store.SetNXValuer.
func (f valueFunc) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	return f(ctx, key, value, ttl)
}

// SetNXBatch implements store.Batcher.
func (f batchFunc) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	return f(ctx, items)
}

// Scan implements store.Scanner.
func (f scanFunc) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	return f(ctx, prefix, fn)
}

// CloseStore closes s if it is a store.Closer.
func CloseStore(s store.Store) error {
	if c, ok := s.(store.Closer); ok {
		return c.Close()
	}
	return nil
}

// OnceCloser closes S, if it is a store.Closer, on the first call to
// Close; later calls return the first call's result.
type OnceCloser struct {
	S    store.Store
	once sync.Once
	err  error
}

// Close closes S once.
func (c *OnceCloser) Close() error {
	c.once.Do(func() { c.err = CloseStore(c.S) })
	return c.err
}
