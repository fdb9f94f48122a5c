package idemfunc_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/testkit"
)

// Wrap refuses every invalid argument with ErrInvalid.
func TestWrapRefusesInvalidArguments(t *testing.T) {
	e := testkit.NewEngine(t)
	fn := func(context.Context, msg) (int, error) { return 1, nil }
	cases := map[string]func() error{
		"nil engine":   func() error { _, err := idemfunc.Wrap(nil, "n", byID, fn); return err },
		"nil key func": func() error { _, err := idemfunc.Wrap(e, "n", nil, fn); return err },
		"nil fn":       func() error { _, err := idemfunc.Wrap[msg, int](e, "n", byID, nil); return err },
		"empty name":   func() error { _, err := idemfunc.Wrap(e, "", byID, fn); return err },
		"long name": func() error {
			_, err := idemfunc.Wrap(e, strings.Repeat("n", idemfunc.MaxNameLen+1), byID, fn)
			return err
		},
		"name w/ space":  func() error { _, err := idemfunc.Wrap(e, "send email", byID, fn); return err },
		"non-ASCII name": func() error { _, err := idemfunc.Wrap(e, "envoi-é", byID, fn); return err },
		"nil option":     func() error { _, err := idemfunc.Wrap(e, "n", byID, fn, nil); return err },
		"nil fingerprint": func() error {
			_, err := idemfunc.Wrap(e, "n", byID, fn, idemfunc.WithFingerprint[msg](nil))
			return err
		},
		"bad engine option": func() error {
			_, err := idemfunc.Wrap(e, "n", byID, fn, idemfunc.WithEngineOptions[msg](idemkit.WithRetention(0)))
			return err
		},
	}
	for name, wrapErr := range cases {
		assert.ErrorIs(t, wrapErr(), idemkit.ErrInvalid, name)
	}
	_, err := idemfunc.Wrap(e, strings.Repeat("n", idemfunc.MaxNameLen), byID, fn)
	assert.NoError(t, err, "a name of MaxNameLen bytes")
}
