package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/idemkit/idemkit/store"
)

// ErrDown is the cause carried by every error of the store Unavailable
// returns.
var ErrDown = errors.New("storetest: backend down")

// Unavailable returns a store.Store whose backend is down: every operation
// fails at once with an error wrapping store.ErrUnavailable and ErrDown.
// Use it to test what an application does when its store fails (fail-open,
// fail-closed, 503 answers). It is safe for concurrent use.
func Unavailable() store.Store { return down{} }

type down struct{}

func (down) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, store.Unavailable("setnx", ErrDown)
}

func (down) Get(context.Context, string) (store.Entry, error) {
	return store.Entry{}, store.Unavailable("get", ErrDown)
}

func (down) CompareAndSwap(context.Context, string, []byte, []byte, time.Duration) (bool, error) {
	return false, store.Unavailable("compare-and-swap", ErrDown)
}

func (down) CompareAndDelete(context.Context, string, []byte) (bool, error) {
	return false, store.Unavailable("compare-and-delete", ErrDown)
}

func (down) Consume(context.Context, string) ([]byte, error) {
	return nil, store.Unavailable("consume", ErrDown)
}
