package idemkit_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestOptionsFollowTheOptionRule: every exported option of the package is
// accepted by New when valid and refused, naming itself, when not; the
// engine-level options are refused by With and per call, naming each; a
// nil option is refused by its position counted from 1; every error is
// reported, not only the first; every error wraps ErrInvalid (which is
// store.ErrInvalid).
func TestOptionsFollowTheOptionRule(t *testing.T) {
	secret := make([]byte, idemkit.MinKeySecretLen)
	type where int
	const (
		onNew where = iota
		onWith
		onCall // a Do call
	)
	cases := []struct {
		name, option string // option names the exported option the case covers
		at           where
		opts         []idemkit.Option
		errs         []string // what the error says, or nil when the options are accepted
	}{
		{name: "none"},
		{name: "namespace", option: "WithNamespace", opts: []idemkit.Option{idemkit.WithNamespace("orders")}},
		{name: "namespace with a colon", option: "WithNamespace", opts: []idemkit.Option{idemkit.WithNamespace("a:b")}, errs: []string{`WithNamespace("a:b"): `}},
		{name: "empty namespace", option: "WithNamespace", opts: []idemkit.Option{idemkit.WithNamespace("")}, errs: []string{"WithNamespace: "}},
		{name: "namespace on With", option: "WithNamespace", at: onWith, opts: []idemkit.Option{idemkit.WithNamespace("orders")},
			errs: []string{"WithNamespace is set per engine"}},
		{name: "window", option: "WithWindow", opts: []idemkit.Option{idemkit.WithWindow(time.Second)}},
		{name: "zero window", option: "WithWindow", opts: []idemkit.Option{idemkit.WithWindow(0)}, errs: []string{"WithWindow(0s): must be positive"}},
		{name: "lease", option: "WithLease", at: onCall, opts: []idemkit.Option{idemkit.WithLease(time.Minute)}},
		{name: "short lease", option: "WithLease", opts: []idemkit.Option{idemkit.WithLease(time.Millisecond)}, errs: []string{"WithLease(1ms): must be at least 3ms"}},
		{name: "heartbeat", option: "WithHeartbeat", at: onCall, opts: []idemkit.Option{idemkit.WithHeartbeat(time.Second)}},
		{name: "zero heartbeat", option: "WithHeartbeat", opts: []idemkit.Option{idemkit.WithHeartbeat(0)}, errs: []string{"WithHeartbeat(0s): must be at least 1ms"}},
		{name: "heartbeat not shorter than the lease", option: "WithHeartbeat", at: onWith,
			opts: []idemkit.Option{idemkit.WithLease(time.Second), idemkit.WithHeartbeat(time.Second)}, errs: []string{"WithHeartbeat(1s) must be shorter than the lease"}},
		{name: "without heartbeat", option: "WithoutHeartbeat", at: onCall, opts: []idemkit.Option{idemkit.WithoutHeartbeat()}},
		{name: "retention", option: "WithRetention", opts: []idemkit.Option{idemkit.WithRetention(time.Hour)}},
		{name: "zero retention", option: "WithRetention", opts: []idemkit.Option{idemkit.WithRetention(0)}, errs: []string{"WithRetention(0s): must be positive"}},
		{name: "token TTL", option: "WithTokenTTL", opts: []idemkit.Option{idemkit.WithTokenTTL(time.Minute)}},
		{name: "zero token TTL", option: "WithTokenTTL", opts: []idemkit.Option{idemkit.WithTokenTTL(0)}, errs: []string{"WithTokenTTL(0s): must be positive"}},
		{name: "token TTL on Do", option: "WithTokenTTL", at: onCall, opts: []idemkit.Option{idemkit.WithTokenTTL(time.Minute)},
			errs: []string{"WithTokenTTL does not apply to Do"}},
		{name: "release", option: "WithRelease", at: onWith, opts: []idemkit.Option{idemkit.WithRelease(idemkit.ReleaseOnDone)}},
		{name: "unknown release", option: "WithRelease", opts: []idemkit.Option{idemkit.WithRelease(9)}, errs: []string{"WithRelease(9): "}},
		{name: "failure mode", option: "WithFailureMode", at: onCall, opts: []idemkit.Option{idemkit.WithFailureMode(idemkit.FailOpen)}},
		{name: "unknown failure mode", option: "WithFailureMode", opts: []idemkit.Option{idemkit.WithFailureMode(7)}, errs: []string{"WithFailureMode(7): "}},
		{name: "max result size", option: "WithMaxResultSize", at: onCall, opts: []idemkit.Option{idemkit.WithMaxResultSize(10)}},
		{name: "zero max result size", option: "WithMaxResultSize", opts: []idemkit.Option{idemkit.WithMaxResultSize(0)}, errs: []string{"WithMaxResultSize(0): must be positive"}},
		{name: "oversized", option: "WithOversized", at: onCall, opts: []idemkit.Option{idemkit.WithOversized(idemkit.ReleaseKey)}},
		{name: "unknown oversized", option: "WithOversized", opts: []idemkit.Option{idemkit.WithOversized(5)}, errs: []string{"WithOversized(5): "}},
		{name: "retry hint", option: "WithRetryHint", at: onCall, opts: []idemkit.Option{idemkit.WithRetryHint(time.Second)}},
		{name: "negative retry hint", option: "WithRetryHint", opts: []idemkit.Option{idemkit.WithRetryHint(-1)}, errs: []string{"WithRetryHint(-1ns): must be positive"}},
		{name: "wait", option: "WithWait", at: onCall, opts: []idemkit.Option{idemkit.WithWait(0)}},
		{name: "long poll", option: "WithWait", opts: []idemkit.Option{idemkit.WithWait(time.Hour)}, errs: []string{"WithWait(1h0m0s): "}},
		{name: "observer", option: "WithObserver", at: onCall, opts: []idemkit.Option{idemkit.WithObserver(nil)}},
		{name: "error codec", option: "WithErrorCodec", at: onCall, opts: []idemkit.Option{idemkit.WithErrorCodec(nil)}},
		{name: "error codec twice", option: "WithErrorCodec", at: onWith, opts: []idemkit.Option{idemkit.WithErrorCodec(nil), idemkit.WithErrorCodec(idemkit.FinalErrors())},
			errs: []string{"WithErrorCodec: given twice"}},
		{name: "codec twice", option: "WithCodec", at: onCall, opts: []idemkit.Option{idemkit.WithCodec(idemkit.JSON), idemkit.WithCodec(idemkit.JSON)},
			errs: []string{"WithCodec: given twice"}},
		{name: "codec", option: "WithCodec", at: onWith, opts: []idemkit.Option{idemkit.WithCodec(idemkit.JSON)}},
		{name: "nil codec", option: "WithCodec", opts: []idemkit.Option{idemkit.WithCodec(nil)}, errs: []string{"WithCodec(nil): "}},
		{name: "scope", option: "WithScope", at: onCall, opts: []idemkit.Option{idemkit.WithScope("alice")}},
		{name: "empty scope", option: "WithScope", at: onCall, opts: []idemkit.Option{idemkit.WithScope("")}, errs: []string{`WithScope(""): `}},
		{name: "scope on New", option: "WithScope", opts: []idemkit.Option{idemkit.WithScope("alice")}, errs: []string{"the scope is set per call"}},
		{name: "input", option: "WithInput", at: onCall, opts: []idemkit.Option{idemkit.WithInput("place-order", []byte(`{"sku":"pen"}`))}},
		{name: "input without a name", option: "WithInput", at: onCall, opts: []idemkit.Option{idemkit.WithInput("", nil)}, errs: []string{"WithInput: "}},
		{name: "input too long", option: "WithInput", at: onCall, opts: []idemkit.Option{idemkit.WithInput("op", make([]byte, idemkit.MaxInputLen+1))},
			errs: []string{"WithInput: the input has 65537 bytes"}},
		{name: "input on New", option: "WithInput", opts: []idemkit.Option{idemkit.WithInput("op", nil)}, errs: []string{"WithInput is set per call"}},
		{name: "input on With", option: "WithInput", at: onWith, opts: []idemkit.Option{idemkit.WithInput("op", nil)}, errs: []string{"WithInput is set per call"}},
		{name: "readable keys", option: "WithReadableKeys", opts: []idemkit.Option{idemkit.WithReadableKeys()}},
		{name: "readable keys per call", option: "WithReadableKeys", at: onCall, opts: []idemkit.Option{idemkit.WithReadableKeys()},
			errs: []string{"WithReadableKeys is set per engine"}},
		{name: "clock", option: "WithClock", opts: []idemkit.Option{idemkit.WithClock(time.Now)}},
		{name: "nil clock", option: "WithClock", opts: []idemkit.Option{idemkit.WithClock(nil)}, errs: []string{"WithClock(nil): "}},
		{name: "clock on With", option: "WithClock", at: onWith, opts: []idemkit.Option{idemkit.WithClock(time.Now)}, errs: []string{"WithClock is set per engine"}},
		{name: "key secret", option: "WithKeySecret", opts: []idemkit.Option{idemkit.WithKeySecret(secret)}},
		{name: "short key secret", option: "WithKeySecret", opts: []idemkit.Option{idemkit.WithKeySecret(secret[1:])}, errs: []string{"WithKeySecret: "}},
		{name: "key secret per call", option: "WithKeySecret", at: onCall, opts: []idemkit.Option{idemkit.WithKeySecret(secret)},
			errs: []string{"WithKeySecret is set per engine"}},
		{name: "nil", opts: []idemkit.Option{idemkit.WithReadableKeys(), nil}, errs: []string{"idemkit: store: invalid argument: option 2 is nil"}},
		{name: "nil per call", at: onCall, opts: []idemkit.Option{nil, idemkit.WithScope("alice")}, errs: []string{"option 1 is nil"}},
		{name: "every error", opts: []idemkit.Option{nil, idemkit.WithWindow(0), idemkit.WithReadableKeys(), idemkit.WithClock(nil), nil},
			errs: []string{"option 1 is nil", "WithWindow(0s): ", "WithClock(nil): ", "option 5 is nil"}},
		{name: "every engine-level option per call", at: onCall,
			opts: []idemkit.Option{idemkit.WithNamespace("orders"), idemkit.WithClock(time.Now), idemkit.WithKeySecret(secret)},
			errs: []string{"WithNamespace is set per engine", "WithClock is set per engine", "WithKeySecret is set per engine"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		var err error
		switch c.at {
		case onNew:
			_, err = idemkit.New(testkit.NewMem(t), c.opts...)
		case onWith:
			_, err = testkit.NewEngine(t).With(c.opts...)
		case onCall:
			_, err = testkit.NewEngine(t).Do(context.Background(), "k", "", func(context.Context) ([]byte, error) { return nil, nil }, c.opts...)
		}
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
