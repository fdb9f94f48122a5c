package idemnats

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/nats-io/nats.go/jetstream"
)

// KeyFunc returns the key that identifies a message: Nats-Msg-Id by
// default, or a business key (an order ID in a header or the body).
// Deliveries with equal keys run once per Handler name.
type KeyFunc func(msg jetstream.Msg) (string, error)

// Option configures NewHandler.
type Option func(*config) error

type config struct {
	key         KeyFunc
	fingerprint func(jetstream.Msg) (string, error)
	codec       idemkit.ErrorCodec
	final       func(error) bool
	retryDelay  time.Duration
	progress    time.Duration // 0: no InProgress signals
	logger      *slog.Logger
	engineOpts  []idemkit.Option
}

func defaultConfig() config {
	return config{key: HeaderKey(jetstream.MsgIDHeader), retryDelay: DefaultRetryDelay, logger: slog.Default()}
}

// DefaultRetryDelay is the redelivery delay after a transient failure.
const DefaultRetryDelay = time.Second

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
			return fmt.Errorf("idemnats: %w: nil key function", idemkit.ErrInvalid)
		}
		c.key = key
		return nil
	}
}

// WithFingerprint sets how a message's payload is fingerprinted: a
// delivery whose key was first seen with another fingerprint is terminated
// (idemkit.ErrMismatch). By default there is no payload check.
func WithFingerprint(fp func(jetstream.Msg) (string, error)) Option {
	return func(c *config) error {
		if fp == nil {
			return fmt.Errorf("idemnats: %w: nil fingerprint function", idemkit.ErrInvalid)
		}
		c.fingerprint = fp
		return nil
	}
}

// WithErrorCodec sets which handler errors are final, and how they are
// recorded: a final error is stored, the message is terminated, and every
// later duplicate is terminated without running the handler. The codec is
// installed on the Handler's engine view; idemkit.FinalErrors is the usual
// choice.
func WithErrorCodec(ec idemkit.ErrorCodec) Option {
	return func(c *config) error {
		if ec == nil {
			return fmt.Errorf("idemnats: %w: nil error codec", idemkit.ErrInvalid)
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
			return fmt.Errorf("idemnats: %w: nil final predicate", idemkit.ErrInvalid)
		}
		c.final = final
		return nil
	}
}

// WithRetryDelay sets the NakWithDelay delay after a transient failure: a
// handler error that is not final, or a store failure (default
// DefaultRetryDelay; 0 naks for immediate redelivery).
func WithRetryDelay(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("idemnats: %w: negative retry delay %v", idemkit.ErrInvalid, d)
		}
		c.retryDelay = d
		return nil
	}
}

// WithLogger sets where failures to acknowledge or record are logged
// (default slog.Default()). Log records carry the stream sequence, never
// the message key.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("idemnats: %w: nil logger", idemkit.ErrInvalid)
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
			return fmt.Errorf("idemnats: %w: in-progress interval must be positive, got %v", idemkit.ErrInvalid, interval)
		}
		c.progress = interval
		return nil
	}
}
