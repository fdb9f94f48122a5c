package idemnats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/queue/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
)

// KeyFunc returns the key that identifies a message: Nats-Msg-Id by
// default, or a business key (an order ID in a header or the body).
// Deliveries with equal keys run once per Handler name.
type KeyFunc func(msg jetstream.Msg) (string, error)

// Option configures NewHandler. NewHandler refuses an option given an
// invalid argument, naming it, and a nil option by its position counted
// from 1; it reports every error, not only the first, in an error
// wrapping idemkit.ErrInvalid. Of two options setting the same thing, the
// later one applies.
type Option func(*config) error

type config struct {
	key         KeyFunc
	payload     delivery.Payload // WithInclude and WithVolatile
	fingerprint func(jetstream.Msg) (string, error)
	codec       idemkit.ErrorCodec
	final       func(error) bool
	backoff     delivery.Backoff
	progress    time.Duration // 0: no InProgress signals
	logger      *slog.Logger
	report      func(context.Context, jetstream.Msg, Outcome)
	deadLetter  *deadLetter
	engineOpts  []idemkit.Option
}

func defaultConfig() config {
	return config{
		key:     HeaderKey(jetstream.MsgIDHeader),
		backoff: delivery.Backoff{First: DefaultRetryDelay, Max: DefaultMaxRetryDelay, Attempts: DefaultMaxAttempts},
		logger:  slog.Default(),
	}
}

// Retry defaults: a failing message is nakked after 1 s, 2 s, 4 s, ...
// up to 1 min, and terminated (or dead-lettered, WithDeadLetter) when its
// tenth delivery fails: about four minutes of retries.
const (
	// DefaultRetryDelay is the redelivery delay after the first failure.
	DefaultRetryDelay = time.Second
	// DefaultMaxRetryDelay caps the redelivery delay.
	DefaultMaxRetryDelay = time.Minute
	// DefaultMaxAttempts is how many deliveries a failing message gets.
	DefaultMaxAttempts = 10
)

// HeaderKey returns a KeyFunc that reads the header name; a message
// without it has no key.
func HeaderKey(name string) KeyFunc {
	return func(msg jetstream.Msg) (string, error) {
		if k := msg.Headers().Get(name); k != "" {
			return k, nil
		}
		return "", fmt.Errorf("no %s header", name)
	}
}

// WithKey sets how a message's key is found (default: the Nats-Msg-Id
// header, HeaderKey(jetstream.MsgIDHeader)). A message whose key function
// fails, or returns "", is terminated: it could never be processed safely.
func WithKey(key KeyFunc) Option {
	return func(c *config) error {
		if key == nil {
			return errors.New("WithKey(nil): nil key function")
		}
		c.key = key
		return nil
	}
}

// WithFingerprint sets how a message's payload is fingerprinted: a
// delivery whose key was first seen with another fingerprint is terminated
// (idemkit.ErrMismatch, Outcome.Mismatch). By default the fingerprint is
// a digest of the body, and such a delivery is answered by the key's
// record like any copy (acked as a replay) but reported: Outcome.Mismatch,
// an idemkit.EventMismatch to the engine's observer, a warning in the log.
func WithFingerprint(fp func(jetstream.Msg) (string, error)) Option {
	return func(c *config) error {
		if fp == nil {
			return errors.New("WithFingerprint(nil): nil fingerprint function")
		}
		c.fingerprint = fp
		return nil
	}
}

// WithErrorCodec sets which handler errors are final, and how they are
// recorded: a final error is stored, the message is terminated, and every
// later duplicate is terminated without running the handler. The codec is
// installed on the Handler's engine view with WithEngineOptions' options:
// an idemkit.WithErrorCodec given there as well is refused.
// idemkit.FinalErrors is the usual choice.
func WithErrorCodec(ec idemkit.ErrorCodec) Option {
	return func(c *config) error {
		if ec == nil {
			return errors.New("WithErrorCodec(nil): nil error codec")
		}
		c.codec = ec
		return nil
	}
}

// WithFinal marks more handler errors final: the message is terminated,
// but the error is not recorded, so a later duplicate runs the handler
// again.
func WithFinal(final func(error) bool) Option {
	return func(c *config) error {
		if final == nil {
			return errors.New("WithFinal(nil): nil final predicate")
		}
		c.final = final
		return nil
	}
}

// WithRetryDelay sets one NakWithDelay delay for every failure (0 naks
// for immediate redelivery): it is WithBackoff(d, d).
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithRetryDelay(%v): the retry delay must not be negative", d)
		}
		c.backoff.First, c.backoff.Max = d, d
		return nil
	}
}

// WithBackoff sets the NakWithDelay delays after a failure (a handler
// error that is not final, a panic, a store failure): first after the
// first delivery, doubled for each later one, capped at max (default
// DefaultRetryDelay and DefaultMaxRetryDelay).
func WithBackoff(first, max time.Duration) Option {
	return func(c *config) error {
		if first < 0 || max < first {
			return fmt.Errorf("WithBackoff(%v, %v): retry delays must have 0 <= first <= max", first, max)
		}
		c.backoff.First, c.backoff.Max = first, max
		return nil
	}
}

// WithMaxAttempts sets how many deliveries a message whose handler keeps
// failing gets (default DefaultMaxAttempts): when delivery number n fails
// (the server's delivery count, Metadata().NumDelivered), the message is
// dead-lettered (WithDeadLetter) or terminated instead of nakked. Store
// failures, which are no fault of the message, are retried whatever the
// count. n must be at least 1.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithMaxAttempts(%d): max attempts must be at least 1", n)
		}
		c.backoff.Attempts = n
		return nil
	}
}

// WithReport sets a function called with every delivery's outcome, once
// it is acknowledged: the place to count panics (Outcome.Panicked),
// exhausted messages (Outcome.Exhausted) and payload mismatches
// (Outcome.Mismatch) in metrics. It is called on the delivery's goroutine
// and must be fast and safe for concurrent use.
func WithReport(fn func(ctx context.Context, msg jetstream.Msg, out Outcome)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithReport(nil): nil report function")
		}
		c.report = fn
		return nil
	}
}

// WithLogger sets where failures to acknowledge or record are logged
// (default slog.Default()). Log records carry the stream sequence, never
// the message key.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return errors.New("WithLogger(nil): nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithEngineOptions sets the engine options of every claim (WithLease,
// WithRetention, WithRetryHint, WithFailureMode, ...), validated once by
// NewHandler.
func WithEngineOptions(opts ...idemkit.Option) Option {
	return func(c *config) error {
		c.engineOpts = append(c.engineOpts, opts...)
		return nil
	}
}

// WithInProgress makes the Handler tell the server, every interval, that
// a delivery is still being worked on (Msg.InProgress), from when it is
// received until it is acknowledged, so a handler that outlives the
// consumer's AckWait is not redelivered meanwhile. Choose an interval well
// under AckWait. Without it, such a delivery is redelivered, and the copy
// is nakked while the first runs.
func WithInProgress(interval time.Duration) Option {
	return func(c *config) error {
		if interval <= 0 {
			return fmt.Errorf("WithInProgress(%v): in-progress interval must be positive", interval)
		}
		c.progress = interval
		return nil
	}
}

// WithBodyKey sets the key to the member of a JSON message body that
// path names, written as for keying.NewKeyPath ("order_id",
// "data.object.id"): a string or a number, of 1 to keying.MaxKeyLen
// printable ASCII bytes. A message whose body has no such member, holds
// another kind of value there or is not one valid JSON value has no key
// (see WithKey). A malformed path, or one through arrays, is refused.
func WithBodyKey(path string) Option {
	return func(c *config) error {
		read, err := delivery.BodyKey(path)
		if err != nil {
			return fmt.Errorf("WithBodyKey: %w", err)
		}
		c.key = func(msg jetstream.Msg) (string, error) { return read(msg.Data()) }
		return nil
	}
}

// WithInclude makes the payload fingerprint cover only the named members
// of a JSON body (keying.WithInclude), and a delivery whose key was first
// seen with other values there is refused as with WithFingerprint
// (idemkit.ErrMismatch, Outcome.Mismatch): the application says what must
// match. A malformed path is refused; so is WithFingerprint as well.
func WithInclude(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error { return c.payload.AddInclude(paths) }
}

// WithVolatile leaves the named members of a JSON body out of the payload
// fingerprint (keying.WithVolatile), such as a send time that changes
// when a publisher resends; a delivery whose key was first seen with
// another fingerprint is then refused as with WithFingerprint. A
// malformed path is refused; so is WithFingerprint as well.
func WithVolatile(paths ...string) Option {
	paths = slices.Clone(paths)
	return func(c *config) error { return c.payload.AddVolatile(paths) }
}

// payloadFingerprint installs the fingerprint of WithInclude and
// WithVolatile's paths, and refuses them beside WithFingerprint.
func (c *config) payloadFingerprint() error {
	if !c.payload.Set() {
		return nil
	}
	if c.fingerprint != nil {
		return delivery.ErrPayloadAndFingerprint
	}
	fp, err := c.payload.Fingerprint()
	if err != nil {
		return err
	}
	c.fingerprint = func(msg jetstream.Msg) (string, error) { return fp(msg.Data()), nil }
	return nil
}
