package netcore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// Mode is the kind of guard a constructor builds.
type Mode uint8

// The modes, one per constructor.
const (
	ModeKey    Mode = iota + 1 // Idempotency: a client key per request
	ModeWindow                 // Window: the same request inside a window
	ModeToken                  // Token: a one-time token per request
	ModeIssuer                 // TokenIssuer: hands out tokens
)

func (m Mode) String() string {
	switch m {
	case ModeKey:
		return "Idempotency"
	case ModeWindow:
		return "Window"
	case ModeToken:
		return "Token"
	}
	return "TokenIssuer"
}

// DefaultMaxBody is the largest request body, in bytes, read for a
// fingerprint; a larger one gets 413.
const DefaultMaxBody = 1 << 20

// maxReplayHeaders bounds the replay allow-list.
const maxReplayHeaders = 64

// Config is what the options of every mode set. An adapter keeps one in
// its own config, beside its principal function, and its options call the
// setters below, which refuse what the mode does not use.
type Config struct {
	Mode          Mode
	Namespace     string // the first part of every engine key: "gin", "echo"
	KeyHeader     string
	TokenHeader   string
	Methods       []string
	OptionalKey   bool
	ReplayHeaders []string
	StorePolicy   func(status int) bool
	MaxStored     int
	MaxBody       int64
	Volatile      []string
	EngineOpts    []idemkit.Option
	Logger        *slog.Logger
	Query         []string // the query parameters fingerprinted, when QuerySet
	QuerySet      bool
	Fingerprinter *keying.Fingerprinter // nil for the mode's default
	ReplayHeader  string                // marks replays
	TooLarge      Unstored              // what a response over MaxStored leaves
	Streamed      Unstored              // what a flushed or hijacked response leaves
	ProblemBase   string                // the prefix of the problem type URIs

	set map[string]bool // the setters already applied, to refuse a repeat
}

// NewConfig returns the defaults of mode m for adapter namespace.
func NewConfig(m Mode, namespace string) Config {
	return Config{
		Mode:          m,
		Namespace:     namespace,
		KeyHeader:     httpcore.DefaultKeyHeader,
		TokenHeader:   httpcore.DefaultTokenHeader,
		Methods:       []string{http.MethodPost, http.MethodPatch},
		ReplayHeaders: httpcore.DefaultReplayHeaders(),
		StorePolicy:   httpcore.DefaultStorePolicy,
		MaxStored:     httpcore.DefaultMaxStoredResponse,
		MaxBody:       DefaultMaxBody,
		ReplayHeader:  httpcore.ReplayedHeader,
		ProblemBase:   httpcore.DefaultProblemBase,
	}
}

// Unstored says what a key or token keeps when the handler's response
// cannot be stored for replay (WithUnstored).
type Unstored uint8

// The Unstored values.
const (
	// KeepTerminal (the default) stores a terminal record: a retry gets
	// 500 response-not-stored, marked replayed, and the handler does not
	// run again.
	KeepTerminal Unstored = iota
	// ReleaseKey releases the key, so a retry runs the handler again (in
	// Token mode the token is spent without a result: a reuse gets 409
	// token-used).
	ReleaseKey
)

// Only refuses option name given to a constructor it does not apply to,
// and the option given twice where it would replace the first.
func (c *Config) Only(name string, modes ...Mode) error {
	if !slices.Contains(modes, c.Mode) {
		names := make([]string, len(modes))
		for i, m := range modes {
			names[i] = m.String()
		}
		return fmt.Errorf("%s applies to %s only, not %s", name, strings.Join(names, " and "), c.Mode)
	}
	return c.once(name)
}

func (c *Config) once(name string) error {
	if c.set[name] {
		return fmt.Errorf("%s given twice", name)
	}
	if c.set == nil {
		c.set = map[string]bool{}
	}
	c.set[name] = true
	return nil
}

// Check returns what is wrong with c as a whole, after every option.
func (c *Config) Check() []error {
	var errs []error
	if len(c.ReplayHeaders) > maxReplayHeaders {
		errs = append(errs, fmt.Errorf("WithReplayHeaders: more than %d replay headers", maxReplayHeaders))
	}
	if slices.Contains(c.ReplayHeaders, c.ReplayHeader) {
		errs = append(errs, fmt.Errorf("WithReplayHeaders: header %s cannot be replayed: it marks replays (WithReplayHeader)", c.ReplayHeader))
	}
	if c.Fingerprinter != nil && len(c.Volatile) > 0 {
		errs = append(errs, errors.New("WithVolatile and WithFingerprinter cannot be combined: the fingerprinter would ignore the volatile paths; "+
			"give them to keying.NewFingerprinter with keying.WithVolatile instead"))
	}
	return errs
}

var guarding = []Mode{ModeKey, ModeWindow, ModeToken}

// SetKeyHeader is WithKeyHeader.
func (c *Config) SetKeyHeader(name string) error {
	if err := c.Only("WithKeyHeader", ModeKey); err != nil {
		return err
	}
	if !httpcore.ValidToken(name) {
		return fmt.Errorf("WithKeyHeader: %q is not a header name", name)
	}
	c.KeyHeader = http.CanonicalHeaderKey(name)
	return nil
}

// SetTokenHeader is WithTokenHeader.
func (c *Config) SetTokenHeader(name string) error {
	if err := c.Only("WithTokenHeader", ModeToken); err != nil {
		return err
	}
	if !httpcore.ValidToken(name) {
		return fmt.Errorf("WithTokenHeader: %q is not a header name", name)
	}
	c.TokenHeader = http.CanonicalHeaderKey(name)
	return nil
}

// SetMethods is WithMethods.
func (c *Config) SetMethods(methods []string) error {
	if err := c.Only("WithMethods", guarding...); err != nil {
		return err
	}
	if len(methods) == 0 {
		return errors.New("WithMethods: no methods")
	}
	for _, m := range methods {
		if !httpcore.ValidToken(m) {
			return fmt.Errorf("WithMethods: method %q is not a token", m)
		}
	}
	c.Methods = slices.Clone(methods)
	return nil
}

// SetOptionalKey is WithOptionalKey.
func (c *Config) SetOptionalKey() error {
	if err := c.Only("WithOptionalKey", ModeKey); err != nil {
		return err
	}
	c.OptionalKey = true
	return nil
}

// SetReplayHeaders is WithReplayHeaders.
func (c *Config) SetReplayHeaders(names []string) error {
	if err := c.Only("WithReplayHeaders", ModeKey, ModeToken); err != nil {
		return err
	}
	for _, n := range names {
		switch {
		case !httpcore.ValidToken(n):
			return fmt.Errorf("WithReplayHeaders: %q is not a header name", n)
		case strings.EqualFold(n, "Set-Cookie"), strings.EqualFold(n, httpcore.ReplayedHeader):
			return fmt.Errorf("WithReplayHeaders: header %s cannot be replayed", n)
		}
		if n = http.CanonicalHeaderKey(n); !slices.Contains(c.ReplayHeaders, n) {
			c.ReplayHeaders = append(c.ReplayHeaders, n)
		}
	}
	return nil
}

// SetStorePolicy is WithStorePolicy.
func (c *Config) SetStorePolicy(store func(status int) bool) error {
	if err := c.Only("WithStorePolicy", guarding...); err != nil {
		return err
	}
	if store == nil {
		return errors.New("WithStorePolicy: nil store policy")
	}
	c.StorePolicy = store
	return nil
}

// SetMaxStored is WithMaxStoredResponse.
func (c *Config) SetMaxStored(n int) error {
	if err := c.Only("WithMaxStoredResponse", ModeKey, ModeToken); err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("WithMaxStoredResponse(%d): must be positive", n)
	}
	c.MaxStored = n
	return nil
}

// SetMaxBody is WithMaxBody.
func (c *Config) SetMaxBody(n int64) error {
	if err := c.Only("WithMaxBody", ModeKey, ModeWindow); err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("WithMaxBody(%d): must be positive", n)
	}
	c.MaxBody = n
	return nil
}

// AddVolatile is WithVolatile.
func (c *Config) AddVolatile(paths []string) error {
	if !slices.Contains([]Mode{ModeKey, ModeWindow}, c.Mode) {
		return fmt.Errorf("WithVolatile applies to Idempotency and Window only, not %s", c.Mode)
	}
	c.Volatile = append(c.Volatile, paths...)
	return nil
}

// AddEngineOptions is WithEngineOptions.
func (c *Config) AddEngineOptions(opts []idemkit.Option) error {
	c.EngineOpts = append(c.EngineOpts, opts...)
	return nil
}

// SetLogger is WithLogger.
func (c *Config) SetLogger(l *slog.Logger) error {
	if err := c.once("WithLogger"); err != nil {
		return err
	}
	if l == nil {
		return errors.New("WithLogger: nil logger: leave WithLogger out for slog.Default()")
	}
	c.Logger = l
	return nil
}

// SetPrincipal is WithPrincipal, for an adapter's principal function type.
func SetPrincipal[F ~func(C) (string, error), C any](dst *F, fn F) error {
	switch {
	case fn == nil:
		return errors.New("WithPrincipal: nil principal function")
	case *dst != nil:
		return errors.New("WithPrincipal given twice")
	}
	*dst = fn
	return nil
}

// SetQueryParams is WithQueryParams.
func (c *Config) SetQueryParams(names []string) error {
	if err := c.Only("WithQueryParams", ModeKey, ModeWindow); err != nil {
		return err
	}
	for _, n := range names {
		if n == "" {
			return errors.New("WithQueryParams: empty parameter name")
		}
	}
	c.Query, c.QuerySet = slices.Clone(names), true
	return nil
}

// SetFingerprinter is WithFingerprinter.
func (c *Config) SetFingerprinter(f *keying.Fingerprinter) error {
	if err := c.Only("WithFingerprinter", ModeKey, ModeWindow); err != nil {
		return err
	}
	if f == nil {
		return errors.New("WithFingerprinter: nil fingerprinter")
	}
	c.Fingerprinter = f
	return nil
}

// SetReplayHeader is WithReplayHeader.
func (c *Config) SetReplayHeader(name string) error {
	if err := c.Only("WithReplayHeader", ModeKey, ModeToken); err != nil {
		return err
	}
	if !httpcore.ValidToken(name) {
		return fmt.Errorf("WithReplayHeader: %q is not a header name", name)
	}
	c.ReplayHeader = http.CanonicalHeaderKey(name)
	return nil
}

// SetUnstored is WithUnstored.
func (c *Config) SetUnstored(tooLarge, streamed Unstored) error {
	if err := c.Only("WithUnstored", ModeKey, ModeToken); err != nil {
		return err
	}
	if tooLarge > ReleaseKey || streamed > ReleaseKey {
		return fmt.Errorf("WithUnstored(%d, %d): unknown Unstored value", tooLarge, streamed)
	}
	c.TooLarge, c.Streamed = tooLarge, streamed
	return nil
}

// SetProblemBase is WithProblemBase.
func (c *Config) SetProblemBase(base string) error {
	if err := c.once("WithProblemBase"); err != nil {
		return err
	}
	u, err := url.Parse(base)
	if err != nil || !u.IsAbs() || strings.ContainsAny(base, " \t\r\n") {
		return fmt.Errorf("WithProblemBase: %q is not an absolute URI", base)
	}
	c.ProblemBase = base
	return nil
}

// SetWait is WithWait.
func (c *Config) SetWait(poll time.Duration) error {
	if err := c.Only("WithWait", ModeKey, ModeToken); err != nil {
		return err
	}
	if poll < 0 || (poll > 0 && poll < time.Millisecond) || poll > time.Minute {
		return fmt.Errorf("WithWait(%v): poll interval must be 0 (idemkit.DefaultPollInterval) or between 1ms and 1m", poll)
	}
	c.EngineOpts = append(c.EngineOpts, idemkit.WithWait(poll))
	return nil
}
