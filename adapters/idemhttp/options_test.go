package idemhttp_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/keying"
)

// constructors builds each route kind over e, reporting only the error.
func constructors(e *idemkit.Engine) map[string]func(...idemhttp.Option) error {
	return map[string]func(...idemhttp.Option) error{
		"Idempotency": func(o ...idemhttp.Option) error { _, err := idemhttp.Idempotency(e, o...); return err },
		"Window":      func(o ...idemhttp.Option) error { _, err := idemhttp.Window(e, o...); return err },
		"Token":       func(o ...idemhttp.Option) error { _, err := idemhttp.Token(e, o...); return err },
		"TokenIssuer": func(o ...idemhttp.Option) error { _, err := idemhttp.TokenIssuer(e, o...); return err },
	}
}

// A nil logger would be replaced by slog.Default() without a word; like
// every other nil option of the package it is refused.
func TestWithLoggerRefusesNil(t *testing.T) {
	for name, ctor := range constructors(testkit.NewEngine(t)) {
		err := ctor(byUser, idemhttp.WithLogger(nil))
		require.ErrorIs(t, err, idemkit.ErrInvalid, name)
		assert.Contains(t, err.Error(), "nil logger", name)
		assert.NoError(t, ctor(byUser, idemhttp.WithLogger(slog.Default())), name)
	}
}

// A custom fingerprinter never sees the paths WithVolatile names, so the
// pair is refused, in either order, instead of one being ignored.
func TestWithVolatileAndWithFingerprinterAreExclusive(t *testing.T) {
	fp, err := keying.NewFingerprinter()
	require.NoError(t, err)
	for _, name := range []string{"Idempotency", "Window"} {
		ctor := constructors(testkit.NewEngine(t))[name]
		for _, opts := range [][]idemhttp.Option{
			{byUser, idemhttp.WithVolatile("ts"), idemhttp.WithFingerprinter(fp)},
			{byUser, idemhttp.WithFingerprinter(fp), idemhttp.WithVolatile("ts")},
		} {
			err := ctor(opts...)
			require.ErrorIs(t, err, idemkit.ErrInvalid, name)
			assert.Contains(t, err.Error(), "WithVolatile", name)
			assert.Contains(t, err.Error(), "WithFingerprinter", name)
		}
		assert.NoError(t, ctor(byUser, idemhttp.WithFingerprinter(fp)), name)
		assert.NoError(t, ctor(byUser, idemhttp.WithVolatile("ts")), name)
	}
}

// Every option names the constructors it applies to; given to another, it
// would be ignored, so the constructor refuses it with the option's name,
// as idemgrpc refuses an option of the other side.
func TestOptionsRefusedOutsideTheirMode(t *testing.T) {
	fp, err := keying.NewFingerprinter()
	require.NoError(t, err)
	const all = "Idempotency Window Token TokenIssuer"
	options := []struct {
		name string
		opt  idemhttp.Option
		in   string // the constructors that accept it
	}{
		{"WithPrincipal", byUser, all},
		{"WithKeyHeader", idemhttp.WithKeyHeader("X-Key"), "Idempotency"},
		{"WithOptionalKey", idemhttp.WithOptionalKey(), "Idempotency"},
		{"WithPayloadWindow", idemhttp.WithPayloadWindow(time.Minute), "Idempotency"},
		{"WithTokenHeader", idemhttp.WithTokenHeader("X-Token"), "Token"},
		{"WithTokenField", idemhttp.WithTokenField("tok"), "Token"},
		{"WithMethods", idemhttp.WithMethods(http.MethodPut), "Idempotency Window Token"},
		{"WithStorePolicy", idemhttp.WithStorePolicy(idemhttp.StoreAll), "Idempotency Window Token"},
		{"WithMaxBody", idemhttp.WithMaxBody(10), "Idempotency Window"},
		{"WithQueryParams", idemhttp.WithQueryParams("a"), "Idempotency Window"},
		{"WithVolatile", idemhttp.WithVolatile("ts"), "Idempotency Window"},
		{"WithFingerprinter", idemhttp.WithFingerprinter(fp), "Idempotency Window"},
		{"WithInclude", idemhttp.WithInclude("amount"), "Idempotency Window"},
		{"WithKeyFrom", idemhttp.WithKeyFrom(idemhttp.KeyFromJSON("id")), "Idempotency"},
		{"Callback", idemhttp.Callback(0), "Idempotency"},
		{"WithReplayHeaders", idemhttp.WithReplayHeaders("X-Order"), "Idempotency Token"},
		{"WithReplayHeader", idemhttp.WithReplayHeader("X-Replayed"), "Idempotency Token"},
		{"WithMaxStoredResponse", idemhttp.WithMaxStoredResponse(10), "Idempotency Token"},
		{"WithUnstored", idemhttp.WithUnstored(idemhttp.ReleaseKey, idemhttp.ReleaseKey), "Idempotency Token"},
		{"WithWait", idemhttp.WithWait(0), "Idempotency Token"},
		{"WithEngineOptions", idemhttp.WithEngineOptions(idemkit.WithRetryHint(time.Second)), all},
		{"WithLogger", idemhttp.WithLogger(slog.Default()), all},
		{"WithProblemBase", idemhttp.WithProblemBase("https://example.test/p/"), all},
		{"WithProblemMembers", idemhttp.WithProblemMembers(0), all},
		{"WithProblemInstance", idemhttp.WithProblemInstance(idemhttp.UUIDInstance), all},
	}
	for ctorName, ctor := range constructors(testkit.NewEngine(t)) {
		for _, o := range options {
			err := ctor(byUser, o.opt)
			if strings.Contains(o.in, ctorName) {
				assert.NoError(t, err, "%s in %s", o.name, ctorName)
				continue
			}
			if assert.ErrorIs(t, err, idemkit.ErrInvalid, "%s in %s", o.name, ctorName) {
				assert.Contains(t, err.Error(), o.name+": applies to ", "%s in %s", o.name, ctorName)
				assert.Contains(t, err.Error(), "not "+ctorName, "%s in %s", o.name, ctorName)
			}
		}
	}
}

// In Token mode the body is read only for the token's form field, so
// WithMaxBody without WithTokenField would bound nothing.
func TestWithMaxBodyInTokenModeNeedsWithTokenField(t *testing.T) {
	ctor := constructors(testkit.NewEngine(t))["Token"]
	err := ctor(byUser, idemhttp.WithMaxBody(10))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	assert.Contains(t, err.Error(), "WithTokenField")
	assert.NoError(t, ctor(byUser, idemhttp.WithMaxBody(10), idemhttp.WithTokenField("tok")))
	assert.NoError(t, ctor(byUser, idemhttp.WithTokenField("tok"), idemhttp.WithMaxBody(10)))
}

// A nil Option in a list (a conditional option left unset) is an error
// from the constructor, not a panic.
func TestNilOptionIsRefused(t *testing.T) {
	for name, ctor := range constructors(testkit.NewEngine(t)) {
		var err error
		require.NotPanics(t, func() { err = ctor(byUser, nil) }, name)
		require.ErrorIs(t, err, idemkit.ErrInvalid, name)
		assert.Contains(t, err.Error(), "option 2 is nil", name) // byUser is option 1
	}
}

// The replay header is the middleware's own: listed for replay it would be
// overwritten on every replay. It is refused, as idemfiber refuses it,
// whatever the order of the options.
func TestWithReplayHeadersRefusesTheReplayHeader(t *testing.T) {
	for _, name := range []string{"Idempotency", "Token"} {
		ctor := constructors(testkit.NewEngine(t))[name]
		for why, opts := range map[string][]idemhttp.Option{
			"the default replay":      {byUser, idemhttp.WithReplayHeaders(idemhttp.ReplayedHeader)},
			"a custom replay, after":  {byUser, idemhttp.WithReplayHeader("X-Replay"), idemhttp.WithReplayHeaders("x-replay")},
			"a custom replay, before": {byUser, idemhttp.WithReplayHeaders("x-replay"), idemhttp.WithReplayHeader("X-Replay")},
		} {
			err := ctor(opts...)
			if assert.ErrorIs(t, err, idemkit.ErrInvalid, "%s: %s", name, why) {
				assert.Contains(t, err.Error(), "cannot be replayed", "%s: %s", name, why)
			}
		}
		assert.NoError(t, ctor(byUser, idemhttp.WithReplayHeaders(idemhttp.ReplayedHeader), idemhttp.WithReplayHeader("X-Replay")),
			"%s: the default name is free once another marks replays", name)
	}
}
