package setup

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// Config chooses the store stack Build assembles. Only Store is required;
// the zero value of every other field is the recommended default.
type Config struct {
	// Store is the URL of the store, e.g. "redis://:pw@cache:6379/0" (see
	// store.Open and the package documentation of each backend).
	Store string
	// Fallback is the URL of a store that answers while Store fails, e.g.
	// "mem://" (see tiered.New for what it does and does not
	// guarantee). Empty means none.
	Fallback string
	// OnStoreError is the engine's failure mode: idemkit.FailClosed (the
	// default) or idemkit.FailOpen.
	OnStoreError idemkit.FailureMode
	// Budget is the time each call to Store may take before it counts as
	// failed (budget.New). Zero selects budget.Default for
	// stores reached over the network and no budget for in-process ones
	// (mem, bolt); NoBudget turns it off.
	Budget time.Duration
	// NearCache is the capacity, in keys, of a cache of settled results
	// in front of the stack (nearcache.New). Zero means no cache.
	NearCache int
	// KeySecret, when not nil, is the deployment secret the engines key
	// their store key names, stored fingerprints and log digests with
	// (idemkit.WithKeySecret): at least idemkit.MinKeySecretLen bytes.
	// FromEnv reads it from IDEMKIT_KEY_SECRET or IDEMKIT_KEY_SECRET_FILE
	// (LoadKeySecret). String and errors never show it.
	KeySecret []byte
	// OnTierEvent, when not nil, receives the fallback's breaker changes
	// and copy problems (tiered.WithObserver). Environment variables
	// cannot set it.
	OnTierEvent func(TierEvent)
	// Open, when not nil, opens the stores in place of store.Open: a
	// program that shares a store's database with data of its own (its
	// orders in the same bbolt file, say) opens it itself for the
	// schemes it cares about and calls store.Open for the others.
	Open func(ctx context.Context, rawURL string) (store.Store, error)
}

// NoBudget is the Config.Budget that gives the store no time budget.
const NoBudget time.Duration = -1

// The environment variables FromEnv reads.
const (
	EnvStore        = "IDEMKIT_STORE"
	EnvFallback     = "IDEMKIT_FALLBACK"
	EnvOnStoreError = "IDEMKIT_ON_STORE_ERROR"
	EnvBudget       = "IDEMKIT_BUDGET"
	EnvNearCache    = "IDEMKIT_NEAR_CACHE"
)

var envNames = []string{EnvStore, EnvFallback, EnvOnStoreError, EnvBudget, EnvNearCache, EnvKeySecret, EnvKeySecretFile}

// ErrConfig reports a configuration Build or FromEnv cannot use. Errors
// wrapping it name the setting (or variable) at fault and never quote a
// password. ErrConfig wraps store.ErrInvalid (idemkit.ErrInvalid), as
// every package's configuration errors do.
var ErrConfig error = configError{}

// configError is ErrConfig: its text is its own, and it unwraps to
// store.ErrInvalid.
type configError struct{}

func (configError) Error() string { return "setup: invalid configuration" }
func (configError) Unwrap() error { return store.ErrInvalid }

// FromEnv reads a Config from environ, a list of "NAME=value" entries as
// os.Environ returns. Unset or empty variables keep their defaults (an
// unset IDEMKIT_STORE leaves Config.Store empty, for the program to fill
// in). A variable named IDEMKIT_* that FromEnv does not know, or a value
// it cannot parse, is an error wrapping ErrConfig that names it. URLs are
// checked by Build, which opens them.
func FromEnv(environ []string) (Config, error) {
	var c Config
	env := map[string]string{}
	secretText := "" // the secret is used as it is, never trimmed
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "IDEMKIT_") {
			continue
		}
		if !slices.Contains(envNames, name) {
			return Config{}, fmt.Errorf("%w: unknown variable %s (known: %s)", ErrConfig, name, strings.Join(envNames, ", "))
		}
		if name == EnvKeySecret {
			secretText = value
		}
		env[name] = strings.TrimSpace(value)
	}
	c.Store, c.Fallback = env[EnvStore], env[EnvFallback]
	var err error
	if c.KeySecret, err = LoadKeySecret(secretText, env[EnvKeySecretFile]); err != nil {
		return Config{}, err
	}
	if v := env[EnvOnStoreError]; v != "" {
		if c.OnStoreError, err = ParseFailureMode(v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvOnStoreError, err)
		}
	}
	if v := env[EnvBudget]; v != "" {
		if c.Budget, err = ParseBudget(v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvBudget, err)
		}
	}
	if v := env[EnvNearCache]; v != "" {
		if c.NearCache, err = ParseNearCache(v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvNearCache, err)
		}
	}
	return c, nil
}

// ParseFailureMode parses "closed" or "open", the values of
// IDEMKIT_ON_STORE_ERROR, for flags that set Config.OnStoreError.
func ParseFailureMode(s string) (idemkit.FailureMode, error) {
	switch s {
	case "closed":
		return idemkit.FailClosed, nil
	case "open":
		return idemkit.FailOpen, nil
	}
	return 0, fmt.Errorf("%w: failure mode %q: want closed or open", ErrConfig, s)
}

// ParseBudget parses a positive duration ("100ms") or "off" (NoBudget),
// the values of IDEMKIT_BUDGET, for flags that set Config.Budget.
func ParseBudget(s string) (time.Duration, error) {
	if s == "off" {
		return NoBudget, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: budget %q: want a positive duration such as 100ms, or off", ErrConfig, s)
	}
	return d, nil
}

// ParseNearCache parses a positive number of keys or "off" (0), the
// values of IDEMKIT_NEAR_CACHE, for flags that set Config.NearCache.
func ParseNearCache(s string) (int, error) {
	if s == "off" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: near cache %q: want a positive number of keys, or off", ErrConfig, s)
	}
	return n, nil
}

// check validates c's settings other than the URLs, which Build opens.
func (c Config) check() error {
	switch {
	case c.Store == "":
		return fmt.Errorf("%w: no store URL (set %s, e.g. mem:// or redis://host:6379)", ErrConfig, EnvStore)
	case c.OnStoreError != idemkit.FailClosed && c.OnStoreError != idemkit.FailOpen:
		return fmt.Errorf("%w: unknown failure mode %d", ErrConfig, c.OnStoreError)
	case c.Budget < 0 && c.Budget != NoBudget:
		return fmt.Errorf("%w: budget %v: want a positive duration, 0 for the default or NoBudget", ErrConfig, c.Budget)
	case c.NearCache < 0:
		return fmt.Errorf("%w: near cache capacity %d: want 0 (none) or more", ErrConfig, c.NearCache)
	}
	return checkKeySecret(c.KeySecret)
}

// localSchemes are the schemes of in-process stores, which get no time
// budget unless Config.Budget asks for one.
var localSchemes = []string{"mem", "bolt"}

// budgetFor returns the budget c gives the store at rawURL, 0 for none.
func (c Config) budgetFor(rawURL string) time.Duration {
	switch {
	case c.Budget == NoBudget:
		return 0
	case c.Budget > 0:
		return c.Budget
	}
	if u, err := url.Parse(rawURL); err == nil && slices.Contains(localSchemes, u.Scheme) {
		return 0
	}
	return defaultBudget
}

// String describes c, passwords hidden.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString(store.Redact(c.Store))
	if d := c.budgetFor(c.Store); d > 0 {
		fmt.Fprintf(&b, " (budget %v)", d)
	}
	if c.Fallback != "" {
		fmt.Fprintf(&b, ", fallback %s", store.Redact(c.Fallback))
	}
	if c.NearCache > 0 {
		fmt.Fprintf(&b, ", near cache of %d keys", c.NearCache)
	}
	fmt.Fprintf(&b, ", on store error: %v", c.OnStoreError)
	if c.KeySecret != nil {
		b.WriteString(", keyed digests")
	}
	return b.String()
}
