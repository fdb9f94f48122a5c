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
	include  []string
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

// WithInclude makes a Fingerprinter hash only the named members of a JSON
// body instead of all of it: the members that must match for a retry to
// be the same request, when the rest (a delivery attempt number, a send
// time) may change. Paths are written as for WithVolatile; a path through
// arrays ("items[].sku") selects that member of every element. A member
// that is absent, or a document of another shape where a path leads, is
// hashed as such, so it still differs from one that holds a value.
// Volatile paths are dropped first. A body that is not JSON is hashed
// whole, raw. NewFingerprinter fails with an error wrapping
// ErrInvalidPath for a malformed path.
func WithInclude(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error {
		if len(paths) == 0 {
			return errors.New("WithInclude: no paths")
		}
		var errs []error
		for _, path := range paths {
			errs = append(errs, canonjson.CheckPath(path))
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("WithInclude: %w", err)
		}
		c.include = append(slices.Clip(c.include), paths...)
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
