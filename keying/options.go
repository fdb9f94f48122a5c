package keying

import (
	"errors"
	"fmt"
	"slices"

	"github.com/idemkit/idemkit/internal/canonjson"
	"github.com/idemkit/idemkit/store"
)

// config holds the settings Options change.
type config struct {
	volatile []string
}

// Option configures a Fingerprinter. An option that cannot apply returns
// an error, which NewFingerprinter reports; it changes nothing then.
type Option func(*config) error

// WithVolatile adds paths to the JSON members a Fingerprinter drops before
// hashing; NewFingerprinter fails with an error wrapping ErrInvalidPath
// (and store.ErrInvalid) that names each malformed one. By default
// nothing is dropped. A path names members from the top of the document,
// matched case-sensitively after unescaping:
//
//   - timestamp: the top-level member "timestamp" (not one nested deeper);
//   - meta.nonce: member "nonce" of the top-level object "meta";
//   - items[].ts: member "ts" of every element of the array "items";
//   - [].ts: member "ts" of every element of a top-level array.
//
// A path ends with a member name. '\' makes the next '.', '[', ']' or '\'
// part of a name (a\.b is the top-level member "a.b"). A path that does not
// match the document (an array where it names a member, say) drops
// nothing.
func WithVolatile(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error {
		var errs []error
		for _, path := range paths {
			errs = append(errs, canonjson.CheckPath(path))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		c.volatile = append(slices.Clip(c.volatile), paths...)
		return nil
	}
}

// apply applies opts to c in order. It refuses a nil option, naming its
// position counted from 1, and collects the errors of every option rather
// than stopping at the first; the result wraps store.ErrInvalid and each
// of them.
func (c *config) apply(opts []Option) error {
	var errs []error
	for i, opt := range opts {
		if opt == nil {
			errs = append(errs, fmt.Errorf("keying: %w: option %d is nil", store.ErrInvalid, i+1))
		} else if err := opt(c); err != nil {
			errs = append(errs, fmt.Errorf("keying: %w: option %d: %w", store.ErrInvalid, i+1, err))
		}
	}
	return errors.Join(errs...)
}
