// Package options holds the one rule by which every idemkit package
// applies its options: an option is a func(*config) error, a nil option is
// refused with its position, every error is reported (not only the first),
// and the result wraps store.ErrInvalid, so errors.Is(err,
// idemkit.ErrInvalid) holds for any of them. Nothing is clamped or
// ignored: an option that cannot take effect returns an error.
package options

import (
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/store"
)

// Apply applies opts to cfg in order. A nil option is an error naming its
// position (counted from 1); an option that fails does not stop the
// others. It returns nil, or every error joined and wrapped in
// store.ErrInvalid.
func Apply[C any, O ~func(*C) error](cfg *C, opts []O) error {
	return Invalid(Collect(cfg, opts)...)
}

// Collect applies opts to cfg as Apply does and returns their errors
// unwrapped, for a constructor that reports them together with errors of
// its own through Invalid.
func Collect[C any, O ~func(*C) error](cfg *C, opts []O) []error {
	var errs []error
	for i, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("option %d is nil", i+1))
			continue
		}
		if err := o(cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Invalid returns nil when every err is nil, and otherwise the non-nil
// ones joined and wrapped in store.ErrInvalid. Constructors use it for
// checks that span options or arguments.
func Invalid(errs ...error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", store.ErrInvalid, err)
}
