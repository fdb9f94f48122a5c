package idemamqp

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit"
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

// Option configures NewHandler.
type Option func(*config) error

type config struct {
	key         KeyFunc
	fingerprint func(*amqp.Delivery) (string, error)
	codec       idemkit.ErrorCodec
	final       func(error) bool
	retryDelay  time.Duration
	logger      *slog.Logger
	engineOpts  []idemkit.Option
}

// DefaultRetryDelay is how long a delivery is held before it is requeued
// after a transient failure.
const DefaultRetryDelay = time.Second

func defaultConfig() config {
	return config{key: MessageIDKey, retryDelay: DefaultRetryDelay, logger: slog.Default()}
}

// WithKey sets how a message's key is found (default MessageIDKey). A
// message whose key function fails, or returns "", is rejected without
// requeue: it could never be processed safely.
func WithKey(key KeyFunc) Option {
	return func(c *config) error {
		if key == nil {
			return fmt.Errorf("idemamqp: %w: nil key function", idemkit.ErrInvalid)
		}
		c.key = key
		return nil
	}
}

// WithFingerprint sets how a message's payload is fingerprinted: a
// delivery whose key was first seen with another fingerprint is rejected
// (idemkit.ErrMismatch). By default there is no payload check.
func WithFingerprint(fp func(*amqp.Delivery) (string, error)) Option {
	return func(c *config) error {
		if fp == nil {
			return fmt.Errorf("idemamqp: %w: nil fingerprint function", idemkit.ErrInvalid)
		}
		c.fingerprint = fp
		return nil
	}
}

// WithErrorCodec sets which handler errors are final, and how they are
// recorded: a final error is stored, the message is rejected without
// requeue, and every later duplicate is rejected without running the
// handler. The codec is installed on the Handler's engine view;
// idemkit.FinalErrors is the usual choice.
func WithErrorCodec(ec idemkit.ErrorCodec) Option {
	return func(c *config) error {
		if ec == nil {
			return fmt.Errorf("idemamqp: %w: nil error codec", idemkit.ErrInvalid)
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
			return fmt.Errorf("idemamqp: %w: nil final predicate", idemkit.ErrInvalid)
		}
		c.final = final
		return nil
	}
}

// WithRetryDelay sets how long a delivery is held before it is requeued
// after a transient failure: a handler error that is not final, or a store
// failure (default DefaultRetryDelay; 0 requeues at once).
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("idemamqp: %w: negative retry delay %v", idemkit.ErrInvalid, d)
		}
		c.retryDelay = d
		return nil
	}
}

// WithLogger sets where failures to acknowledge or record are logged
// (default slog.Default()). Log records carry the delivery tag and the
// redelivered flag, never the message key.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("idemamqp: %w: nil logger", idemkit.ErrInvalid)
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
