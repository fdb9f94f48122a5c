package delivery

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
)

// ErrPanic is wrapped by a *PanicError: the effect panicked.
var ErrPanic = errors.New("handler panicked")

// PanicError is a panic of the effect, recovered: a failed attempt.
type PanicError struct {
	// Value is what the effect panicked with.
	Value any
	// Stack is the goroutine's stack where the panic was recovered.
	Stack []byte
}

// Error returns "handler panicked: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanic, e.Value) }

// Unwrap returns ErrPanic.
func (e *PanicError) Unwrap() error { return ErrPanic }

// call runs fn, turning a panic into a *PanicError.
func call(ctx context.Context, fn Func) (value []byte, err error) {
	defer func() {
		if x := recover(); x != nil {
			value, err = nil, &PanicError{Value: x, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}
