package keying

import (
	"errors"
	"fmt"
	"slices"

	"github.com/idemkit/idemkit/internal/canonjson"
	"github.com/idemkit/idemkit/internal/options"
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
			return fmt.Errorf("WithVolatile: %w", err)
		}
		c.volatile = append(slices.Clip(c.volatile), paths...)
		return nil
	}
}

// apply applies opts to c by the repository's one option rule
// (internal/options): a nil option is refused by its position counted
// from 1, the errors of every option are collected, and the result wraps
// store.ErrInvalid and each of them.
func (c *config) apply(opts []Option) error {
	if err := options.Apply(c, opts); err != nil {
		return fmt.Errorf("keying: %w", err)
	}
	return nil
}
