package idemlambda

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/options"
)

// DefaultDisableEnv is the environment variable WithDisableEnv names in
// the examples: IDEMKIT_DISABLED=1 turns idempotency off.
const DefaultDisableEnv = "IDEMKIT_DISABLED"

// lambdaEnv is set by the Lambda runtime in every function's environment
// (and by emulators such as sam local).
const lambdaEnv = "AWS_LAMBDA_FUNCTION_NAME"

// Option configures Wrap, EventBridge, APIGateway, HTTPAPI and SQS. It
// follows the one option rule of every idemkit package: a nil option is
// refused with its position, every invalid option is reported, the error
// wraps idemkit.ErrInvalid, and an option that does not apply to the
// constructor it is given to (WithKeyHeader to SQS, a WithKeyFunc whose
// function takes another event type) is refused, never ignored.
type Option func(*config) error

// optSet names options by what they set.
type optSet uint8

const (
	optKey optSet = 1 << iota // WithKeyPath, WithKeyFunc, WithKeyHeader
	optPayload
	optDisable
	optAllowInLambda
	optLogger
	optEngine
	optPrincipal
)

type config struct {
	set        optSet
	keyPath    *path
	keyFunc    any    // func(In) (string, error), checked against In
	keyHeader  string // API Gateway only
	principal  *path  // WithPrincipalPath
	principalF any    // WithPrincipalFunc: func(In) (string, error)
	payload    []path
	disableEnv string
	allowLive  bool
	logger     *slog.Logger
	engineOpts []idemkit.Option
}

// once refuses a second option of one kind: it would silently replace the
// first.
func (c *config) once(o optSet, name string) error {
	if c.set&o != 0 {
		if o == optKey {
			return fmt.Errorf("%s: the key is already set (WithKeyPath, WithKeyFunc or WithKeyHeader); the second would replace the first", name)
		}
		return fmt.Errorf("%s: given twice; the second would replace the first", name)
	}
	c.set |= o
	return nil
}

// WithKeyPath takes each invocation's idempotency key from the event's
// JSON at path: segments separated by dots, each an object member's name
// (case-sensitive, as in the event's JSON) or an array index; a segment
// in double quotes may hold dots ("detail.\"order.id\""); a string that
// holds JSON, such as an API Gateway or SQS body, is parsed when the path
// goes on into it ("body.orderId"). The value must be a non-empty string
// or a number. An event without it fails with an error wrapping ErrNoKey
// that names the path (a 400 problem from APIGateway and HTTPAPI).
func WithKeyPath(p string) Option {
	return func(c *config) error {
		if err := c.once(optKey, "WithKeyPath"); err != nil {
			return err
		}
		parsed, err := parsePath(p)
		if err != nil {
			return fmt.Errorf("WithKeyPath: %w", err)
		}
		c.keyPath = &parsed
		return nil
	}
}

// WithKeyFunc takes each invocation's idempotency key from the event with
// f. In must be the event type of the handler it is given to; an error of
// f, or an empty key, fails the invocation with an error wrapping ErrNoKey.
func WithKeyFunc[In any](f func(In) (string, error)) Option {
	return func(c *config) error {
		if err := c.once(optKey, "WithKeyFunc"); err != nil {
			return err
		}
		if f == nil {
			return errors.New("WithKeyFunc(nil): nil key function")
		}
		c.keyFunc = f
		return nil
	}
}

// WithKeyHeader sets the request header APIGateway and HTTPAPI read the
// key from (default Idempotency-Key), matched without regard to case.
// Other constructors refuse it.
func WithKeyHeader(name string) Option {
	return func(c *config) error {
		if err := c.once(optKey, "WithKeyHeader"); err != nil {
			return err
		}
		if !httpcore.ValidToken(name) {
			return fmt.Errorf("WithKeyHeader(%q): not a valid header name", name)
		}
		c.keyHeader = name
		return nil
	}
}

// WithPrincipalPath sets where APIGateway and HTTPAPI read the caller's
// identity in the event (the syntax of WithKeyPath): a member API Gateway
// itself writes, such as "requestContext.authorizer.claims.sub" (REST API,
// Cognito), "requestContext.authorizer.jwt.claims.sub" (HTTP API, JWT) or
// "requestContext.identity.userArn" (IAM), never a header the client
// sends. The principal is the engine scope (idemkit.WithScope) of every
// key, so a response is only replayed to the caller whose request stored
// it: without one, a client that guesses another's key would read that
// client's response. A request without it gets a 401 problem and the
// handler does not run. APIGateway and HTTPAPI require WithPrincipalPath
// or WithPrincipalFunc; other constructors refuse both.
func WithPrincipalPath(p string) Option {
	return func(c *config) error {
		if err := c.once(optPrincipal, "WithPrincipalPath"); err != nil {
			return err
		}
		parsed, err := parsePath(p)
		if err != nil {
			return fmt.Errorf("WithPrincipalPath: %w", err)
		}
		c.principal = &parsed
		return nil
	}
}

// WithPrincipalFunc is WithPrincipalPath with a function of the typed
// request (In is the request type of the handler it is given to). An API
// that serves anonymous callers returns one fixed principal: every caller
// then shares the key space, and its keys must be unguessable.
func WithPrincipalFunc[In any](f func(In) (string, error)) Option {
	return func(c *config) error {
		if err := c.once(optPrincipal, "WithPrincipalFunc"); err != nil {
			return err
		}
		if f == nil {
			return errors.New("WithPrincipalFunc(nil): nil principal function")
		}
		c.principalF = f
		return nil
	}
}

// WithPayloadPaths sets the parts of the event that a repeat must repeat:
// the fingerprint covers the value at each path (the syntax of
// WithKeyPath, compared as canonical JSON; an absent value counts, unlike
// null). A repeat of a key whose selected values differ from the first
// invocation's fails with an error wrapping idemkit.ErrMismatch (a 422
// problem from APIGateway and HTTPAPI). Defaults: none for Wrap; the
// method, path and body for APIGateway and HTTPAPI; "body" for SQS;
// "source", "detail-type" and "detail" for EventBridge.
func WithPayloadPaths(paths ...string) Option {
	return func(c *config) error {
		if err := c.once(optPayload, "WithPayloadPaths"); err != nil {
			return err
		}
		if len(paths) == 0 {
			return errors.New("WithPayloadPaths: no path given")
		}
		c.payload = nil
		var errs []error
		for _, p := range paths {
			parsed, err := parsePath(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("WithPayloadPaths: %w", err))
				continue
			}
			c.payload = append(c.payload, parsed)
		}
		return errors.Join(errs...)
	}
}

// WithDisableEnv names an environment variable that turns idempotency off
// for tests: when it holds "1" or "true" as the handler is built, the
// handler runs every invocation with no key, no store and no replay. ""
// "0" and "false" leave idempotency on; any other value is refused. Inside
// a Lambda function (AWS_LAMBDA_FUNCTION_NAME is set, as it is in every
// deployed function and under emulators) the switch is refused unless
// WithDisableInLambda is given too, so a variable copied into a deployed
// function's configuration fails its start instead of silently dropping
// the protection. Without this option no variable is read.
func WithDisableEnv(name string) Option {
	return func(c *config) error {
		if err := c.once(optDisable, "WithDisableEnv"); err != nil {
			return err
		}
		if name == "" {
			return errors.New(`WithDisableEnv(""): empty variable name`)
		}
		c.disableEnv = name
		return nil
	}
}

// WithDisableInLambda lets WithDisableEnv's switch turn idempotency off
// where AWS_LAMBDA_FUNCTION_NAME is set: under sam local, say. It is
// refused without WithDisableEnv.
func WithDisableInLambda() Option {
	return func(c *config) error {
		if err := c.once(optAllowInLambda, "WithDisableInLambda"); err != nil {
			return err
		}
		c.allowLive = true
		return nil
	}
}

// WithLogger sets where SQS logs the records it reports failed and the
// final failures it acknowledges (default slog.Default()). Logs name the
// message ID and the error, never the key. Other constructors refuse it.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if err := c.once(optLogger, "WithLogger"); err != nil {
			return err
		}
		if l == nil {
			return errors.New("WithLogger(nil): nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithEngineOptions sets engine options for every invocation
// (idemkit.WithErrorCodec, WithRetention, WithWait, WithFailureMode,
// WithMaxResultSize, ...); the constructor validates them once.
// idemkit.WithLease sets the lease of an invocation without a deadline
// only: under a deadline the lease is the time left (see the package
// documentation).
func WithEngineOptions(opts ...idemkit.Option) Option {
	return func(c *config) error {
		if err := c.once(optEngine, "WithEngineOptions"); err != nil {
			return err
		}
		c.engineOpts = opts
		return nil
	}
}

// kind is what a constructor takes besides the options every one takes.
type kind struct {
	call      string // its name, for errors
	header    bool   // takes WithKeyHeader
	logger    bool   // takes WithLogger
	defaultFP []string
}

// build applies opts for the handler kind k over In and checks what spans
// options: a key function of another event type, an option k does not
// take, WithDisableInLambda without WithDisableEnv.
func build[In any](k kind, opts []Option) (*config, error) {
	cfg := &config{logger: slog.Default()}
	errs := options.Collect(cfg, opts)
	if cfg.keyFunc != nil {
		if _, ok := cfg.keyFunc.(func(In) (string, error)); !ok {
			var in In
			errs = append(errs, fmt.Errorf("WithKeyFunc: the function's type is %T, %s needs func(%T) (string, error)", cfg.keyFunc, k.call, in))
		}
	}
	if cfg.principalF != nil {
		if _, ok := cfg.principalF.(func(In) (string, error)); !ok {
			var in In
			errs = append(errs, fmt.Errorf("WithPrincipalFunc: the function's type is %T, %s needs func(%T) (string, error)", cfg.principalF, k.call, in))
		}
	}
	switch {
	case cfg.set&optPrincipal != 0 && !k.header:
		errs = append(errs, fmt.Errorf("WithPrincipalPath and WithPrincipalFunc do not apply to %s", k.call))
	case cfg.set&optPrincipal == 0 && k.header:
		errs = append(errs, errors.New("WithPrincipalPath or WithPrincipalFunc is required: API Gateway keys come from clients, and a response is replayed only to the caller who stored it"))
	}
	if cfg.keyHeader != "" && !k.header {
		errs = append(errs, fmt.Errorf("WithKeyHeader does not apply to %s", k.call))
	}
	if cfg.set&optLogger != 0 && !k.logger {
		errs = append(errs, fmt.Errorf("WithLogger does not apply to %s", k.call))
	}
	if cfg.set&optAllowInLambda != 0 && cfg.disableEnv == "" {
		errs = append(errs, errors.New("WithDisableInLambda without WithDisableEnv: there is no switch to allow"))
	}
	if cfg.set&optPayload == 0 {
		for _, p := range k.defaultFP {
			parsed, err := parsePath(p)
			if err != nil { // the defaults are constants
				panic(err)
			}
			cfg.payload = append(cfg.payload, parsed)
		}
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemlambda: %s: %w", k.call, err)
	}
	return cfg, nil
}

// disabled reads the switch WithDisableEnv names, if any.
func (c *config) disabled() (bool, error) {
	if c.disableEnv == "" {
		return false, nil
	}
	switch v := os.Getenv(c.disableEnv); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		if os.Getenv(lambdaEnv) != "" && !c.allowLive {
			return false, fmt.Errorf("%w: %s=%s inside a Lambda function (%s is set): idempotency stays on; give WithDisableInLambda to allow the switch there", idemkit.ErrInvalid, c.disableEnv, v, lambdaEnv)
		}
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s=%q: want 1, true, 0, false or empty", idemkit.ErrInvalid, c.disableEnv, v)
	}
}
