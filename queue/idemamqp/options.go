package idemamqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/queue/internal/delivery"
	amqp "github.com/rabbitmq/amqp091-go"
)

// KeyFunc returns the key that identifies a message: its MessageId by
// default, or a business key (an order ID in a header or the body).
// Deliveries with equal keys run once per Handler name.
type KeyFunc func(d *amqp.Delivery) (string, error)

// MessageIDKey is the default KeyFunc: the message's MessageId property.
func MessageIDKey(d *amqp.Delivery) (string, error) {
	if d.MessageId == "" {
		return "", fmt.Errorf("no message-id property")
	}
	return d.MessageId, nil
}

// HeaderKey returns a KeyFunc that reads the header name (a string or
// bytes value); a message without it has no key.
func HeaderKey(name string) KeyFunc {
	return func(d *amqp.Delivery) (string, error) {
		switch v := d.Headers[name].(type) {
		case string:
			if v != "" {
				return v, nil
			}
		case []byte:
			if len(v) > 0 {
				return string(v), nil
			}
		case nil:
		default:
			return "", fmt.Errorf("header %s holds a %T, not a string", name, v)
		}
		return "", fmt.Errorf("no %s header", name)
	}
}

// Option configures NewHandler. NewHandler refuses an option given an
// invalid argument, naming it, and a nil option by its position counted
// from 1; it reports every error, not only the first, in an error
// wrapping idemkit.ErrInvalid. Of two options setting the same thing, the
// later one applies.
type Option func(*config) error

type config struct {
	key         KeyFunc
	payload     delivery.Payload // WithInclude and WithVolatile
	fingerprint func(*amqp.Delivery) (string, error)
	codec       idemkit.ErrorCodec
	final       func(error) bool
	backoff     delivery.Backoff
	logger      *slog.Logger
	report      func(context.Context, *amqp.Delivery, Outcome)
	engineOpts  []idemkit.Option
	retryConn   *amqp.Connection
	retryQueue  string
}

// Retry defaults: a failing delivery is retried after 1 s, 2 s, 4 s, ...
// up to 1 min, and rejected (dead-lettered where the queue has a
// dead-letter exchange) when its tenth attempt fails: about four minutes
// of retries.
const (
	// DefaultRetryDelay is how long a delivery waits before it is retried
	// after its first failure.
	DefaultRetryDelay = time.Second
	// DefaultMaxRetryDelay caps the delay.
	DefaultMaxRetryDelay = time.Minute
	// DefaultMaxAttempts is how many attempts a failing message gets.
	DefaultMaxAttempts = 10
)

func defaultConfig() config {
	return config{
		key:     MessageIDKey,
		backoff: delivery.Backoff{First: DefaultRetryDelay, Max: DefaultMaxRetryDelay, Attempts: DefaultMaxAttempts},
		logger:  slog.Default(),
	}
}

// WithKey sets how a message's key is found (default MessageIDKey). A
// message whose key function fails, or returns "", is rejected without
// requeue: it could never be processed safely.
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
// delivery whose key was first seen with another fingerprint is rejected
// (idemkit.ErrMismatch, Outcome.Mismatch). By default the fingerprint is
// a digest of the body, and such a delivery is answered by the key's
// record like any copy (acked as a replay) but reported: Outcome.Mismatch,
// an idemkit.EventMismatch to the engine's observer, a warning in the log.
func WithFingerprint(fp func(*amqp.Delivery) (string, error)) Option {
	return func(c *config) error {
		if fp == nil {
			return errors.New("WithFingerprint(nil): nil fingerprint function")
		}
		c.fingerprint = fp
		return nil
	}
}

// WithErrorCodec sets which handler errors are final, and how they are
// recorded: a final error is stored, the message is rejected without
// requeue, and every later duplicate is rejected without running the
// handler. The codec is installed on the Handler's engine view with
// WithEngineOptions' options: an idemkit.WithErrorCodec given there as
// well is refused. idemkit.FinalErrors is the usual choice.
func WithErrorCodec(ec idemkit.ErrorCodec) Option {
	return func(c *config) error {
		if ec == nil {
			return errors.New("WithErrorCodec(nil): nil error codec")
		}
		c.codec = ec
		return nil
	}
}

// WithFinal marks more handler errors final: the message is rejected
// without requeue, but the error is not recorded, so a later duplicate
// runs the handler again.
func WithFinal(final func(error) bool) Option {
	return func(c *config) error {
		if final == nil {
			return errors.New("WithFinal(nil): nil final predicate")
		}
		c.final = final
		return nil
	}
}

// WithRetryDelay sets one delay for every failure (0 requeues at once,
// even with WithRetryQueue): it is WithBackoff(d, d).
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("WithRetryDelay(%v): the retry delay must not be negative", d)
		}
		c.backoff.First, c.backoff.Max = d, d
		return nil
	}
}

// WithBackoff sets how long a delivery waits before it is retried after a
// failure (a handler error that is not final, a panic, a store failure):
// first after the first attempt, doubled for each later one, capped at
// max (default DefaultRetryDelay and DefaultMaxRetryDelay). With
// WithRetryQueue each distinct delay, in whole milliseconds, is a delay
// queue of its own (7 with the defaults).
func WithBackoff(first, max time.Duration) Option {
	return func(c *config) error {
		if first < 0 || max < first {
			return fmt.Errorf("WithBackoff(%v, %v): retry delays must have 0 <= first <= max", first, max)
		}
		c.backoff.First, c.backoff.Max = first, max
		return nil
	}
}

// WithMaxAttempts sets how many attempts a message whose handler keeps
// failing gets (default DefaultMaxAttempts): when attempt n fails the
// delivery is rejected without requeue, which dead-letters it where the
// queue has a dead-letter exchange (see the package doc for how attempts
// are counted). Store failures, which are no fault of the message, are
// retried whatever the count. n must be at least 1.
func WithMaxAttempts(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithMaxAttempts(%d): max attempts must be at least 1", n)
		}
		c.backoff.Attempts = n
		return nil
	}
}

// WithRetryQueue has failed deliveries wait for their back-off delay in
// delay queues instead of in the Serve loop, so a message that keeps
// failing never holds up the ones behind it. queue is the queue the
// Handler's deliveries come from; conn is a connection the Handler opens
// a publishing channel on (in confirm mode; Close closes it). A delivery
// to retry is copied, with AttemptHeader, to the delay queue of its
// delay (RetryQueueName, declared by the Handler on first use), whose
// messages expire after that delay and are dead-lettered back to queue;
// the delivery is acked only once the broker has confirmed the copy, and
// requeued (after the delay, in the loop) when it has not. See the
// package doc. After a reconnect, build a Handler on the new connection.
func WithRetryQueue(conn *amqp.Connection, queue string) Option {
	return func(c *config) error {
		switch {
		case conn == nil:
			return fmt.Errorf("WithRetryQueue(nil, %q): nil connection for the delay queues", queue)
		case queue == "":
			return errors.New(`WithRetryQueue(conn, ""): empty queue name for the delay queues`)
		}
		c.retryConn, c.retryQueue = conn, queue
		return nil
	}
}

// WithReport sets a function called with every delivery's outcome, once
// it is acknowledged: the place to count panics (Outcome.Panicked),
// exhausted messages (Outcome.Exhausted) and payload mismatches
// (Outcome.Mismatch) in metrics. It is called on the delivery's goroutine
// and must be fast and safe for concurrent use.
func WithReport(fn func(ctx context.Context, d *amqp.Delivery, out Outcome)) Option {
	return func(c *config) error {
		if fn == nil {
			return errors.New("WithReport(nil): nil report function")
		}
		c.report = fn
		return nil
	}
}

// WithLogger sets where failures to acknowledge or record are logged
// (default slog.Default()). Log records carry the delivery tag and the
// redelivered flag, never the message key.
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
		c.key = func(d *amqp.Delivery) (string, error) { return read(d.Body) }
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
	c.fingerprint = func(d *amqp.Delivery) (string, error) { return fp(d.Body), nil }
	return nil
}
