package setup_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/setup"
	"github.com/idemkit/idemkit/store"
)

// TestErrConfigWrapsErrInvalid: every configuration error of FromEnv,
// Build and the Parse functions is an ErrConfig, and an ErrConfig is a
// store.ErrInvalid, so one errors.Is check covers setup as it covers
// every other package's configuration errors. ErrConfig's own text is
// unchanged.
func TestErrConfigWrapsErrInvalid(t *testing.T) {
	if !errors.Is(setup.ErrConfig, store.ErrInvalid) {
		t.Errorf("errors.Is(ErrConfig, store.ErrInvalid) is false")
	}
	if got := setup.ErrConfig.Error(); got != "setup: invalid configuration" {
		t.Errorf("ErrConfig says %q, want %q", got, "setup: invalid configuration")
	}
	fromEnv := func(env ...string) error { _, err := setup.FromEnv(env); return err }
	build := func(c setup.Config) error { _, err := setup.Build(context.Background(), c); return err }
	for name, err := range map[string]error{
		"unknown variable":    fromEnv("IDEMKIT_NOPE=1"),
		"bad failure mode":    fromEnv("IDEMKIT_ON_STORE_ERROR=maybe"),
		"bad budget":          fromEnv("IDEMKIT_BUDGET=-1s"),
		"bad near cache":      fromEnv("IDEMKIT_NEAR_CACHE=-3"),
		"short key secret":    fromEnv("IDEMKIT_KEY_SECRET=short"),
		"two key secrets":     fromEnv("IDEMKIT_KEY_SECRET=0123456789abcdef0123456789abcdef", "IDEMKIT_KEY_SECRET_FILE=/nonexistent"),
		"missing secret file": fromEnv("IDEMKIT_KEY_SECRET_FILE=/nonexistent/secret"),
		"no store":            build(setup.Config{}),
		"negative near cache": build(setup.Config{Store: "mem://", NearCache: -1}),
		"bad budget in Build": build(setup.Config{Store: "mem://", Budget: -2}),
		"parse failure mode":  func() error { _, err := setup.ParseFailureMode("x"); return err }(),
		"parse budget":        func() error { _, err := setup.ParseBudget("x"); return err }(),
		"parse near cache":    func() error { _, err := setup.ParseNearCache("x"); return err }(),
	} {
		if !errors.Is(err, setup.ErrConfig) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v; want an error wrapping ErrConfig and store.ErrInvalid", name, err)
		}
	}
}
