package idemotel_test

import "github.com/idemkit/idemkit/store/memstore"

// mustMem returns a memory store, failing loudly on invalid options.
func mustMem(opts ...memstore.Option) *memstore.Store {
	s, err := memstore.New(opts...)
	if err != nil {
		panic(err)
	}
	return s
}
