package idemlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// keySpace is the first part of every key the adapter gives the engine,
// so no other adapter's keys can meet its keys.
const keySpace = "lambda"

// MaxNameLen is the longest handler name, in bytes.
const MaxNameLen = 64

// minLease is the shortest lease the engine takes (idemkit.WithLease).
const minLease = 3 * time.Millisecond

// Handler is the shape of the handlers the package wraps, and of what it
// returns: lambda.Start takes it as it is.
type Handler[In, Out any] func(ctx context.Context, in In) (Out, error)

// guard is what every wrapper shares: the engine view, the handler's key
// space, how a key and a fingerprint are read from an event.
type guard[In any] struct {
	name    string
	view    *idemkit.Engine
	cfg     *config
	keyFunc func(In) (string, error) // WithKeyFunc, or the kind's default
	off     bool                     // WithDisableEnv's switch is on
}

// newGuard checks the name and the engine, applies opts for the handler
// kind k and builds the engine view. defaultKey, when not nil, is the key
// of an event without WithKeyPath or WithKeyFunc.
func newGuard[In any](e *idemkit.Engine, name string, k kind, defaultKey func(In) (string, error), opts []Option) (*guard[In], error) {
	cfg, err := build[In](k, opts)
	errs := []error{err, checkName(k.call, name)}
	if e == nil {
		errs = append(errs, fmt.Errorf("idemlambda: %s: %w: nil engine", k.call, idemkit.ErrInvalid))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g := &guard[In]{name: name, cfg: cfg, keyFunc: defaultKey}
	if f, ok := cfg.keyFunc.(func(In) (string, error)); ok {
		g.keyFunc = f
	}
	if cfg.keyPath != nil {
		g.keyFunc = nil
	}
	if g.keyFunc == nil && cfg.keyPath == nil && !k.header {
		return nil, fmt.Errorf("idemlambda: %s: %w: no key: give WithKeyPath or WithKeyFunc", k.call, idemkit.ErrInvalid)
	}
	if g.off, err = cfg.disabled(); err != nil {
		return nil, fmt.Errorf("idemlambda: %s: %w", k.call, err)
	}
	if g.view, err = e.With(cfg.engineOpts...); err != nil {
		return nil, fmt.Errorf("idemlambda: %s: engine options: %w", k.call, err)
	}
	return g, nil
}

// checkName refuses a handler name that is empty, too long or not
// printable ASCII.
func checkName(call, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("idemlambda: %s: %w: name must have 1 to %d bytes, got %d", call, idemkit.ErrInvalid, MaxNameLen, len(name))
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return fmt.Errorf("idemlambda: %s: %w: name %q is not printable ASCII without spaces", call, idemkit.ErrInvalid, name)
		}
	}
	return nil
}

// event is one invocation's event, encoded once when a path needs it.
type event[In any] struct {
	in  In
	doc *document
}

// json returns the event's JSON encoding, as the handler received it
// (encoding/json of In).
func (ev *event[In]) json() (*document, error) {
	if ev.doc == nil {
		raw, err := json.Marshal(ev.in)
		if err != nil {
			return nil, fmt.Errorf("idemlambda: encode the event: %w", err)
		}
		ev.doc = &document{raw: raw}
	}
	return ev.doc, nil
}

// key returns the event's key by WithKeyPath or the key function, or an
// error wrapping ErrNoKey and idemkit.ErrInvalid.
func (g *guard[In]) key(ev *event[In]) (string, error) {
	k, err := g.rawKey(ev)
	if err != nil {
		return "", fmt.Errorf("idemlambda: %s: %w: %w", g.name, idemkit.ErrInvalid, err)
	}
	return k, nil
}

// rawKey is key with an error that names neither the handler nor
// idemkit.ErrInvalid, fit for a problem's detail: it never quotes the
// event.
func (g *guard[In]) rawKey(ev *event[In]) (string, error) {
	if g.cfg.keyPath != nil {
		doc, err := ev.json()
		if err != nil {
			return "", err
		}
		return g.cfg.keyPath.keyAt(doc)
	}
	k, err := g.keyFunc(ev.in)
	if err == nil && k == "" {
		err = errors.New("the key function returned an empty key")
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoKey, err)
	}
	return k, nil
}

// fingerprint returns the event's payload fingerprint over the payload
// paths, "" when there are none.
func (g *guard[In]) fingerprint(ev *event[In]) (string, error) {
	if len(g.cfg.payload) == 0 {
		return "", nil
	}
	doc, err := ev.json()
	if err == nil {
		var fp string
		if fp, err = fingerprint(doc, g.cfg.payload); err == nil {
			return fp, nil
		}
	}
	return "", fmt.Errorf("idemlambda: %s: payload fingerprint: %w: %w", g.name, idemkit.ErrInvalid, err)
}

// storeKey is the engine key of an event key.
func (g *guard[In]) storeKey(k string) string { return keying.Key(keySpace, g.name, k) }

// callOptions returns the per-invocation engine options: under a
// deadline the lease is the time left, with no heartbeat, so the claim of
// an invocation that timed out (and was stopped by Lambda) ends when the
// invocation did, and its retry is not kept out for a long lease. It
// returns an error wrapping context.DeadlineExceeded when less than the
// shortest lease is left.
func callOptions(ctx context.Context) ([]idemkit.Option, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil, nil
	}
	left := time.Until(deadline)
	if left < minLease {
		return nil, fmt.Errorf("idemlambda: %v left before the invocation's deadline, under the shortest lease %v: %w", left.Round(time.Microsecond), minLease, context.DeadlineExceeded)
	}
	return []idemkit.Option{idemkit.WithLease(left), idemkit.WithoutHeartbeat()}, nil
}

// mismatch adds the payload paths to an ErrMismatch.
func (g *guard[In]) mismatch(err error) error {
	if !errors.Is(err, idemkit.ErrMismatch) {
		return err
	}
	paths := make([]string, len(g.cfg.payload))
	for i, p := range g.cfg.payload {
		paths[i] = p.text
	}
	return fmt.Errorf("idemlambda: %s: the values at the payload paths %q differ from the first invocation with this key: %w", g.name, paths, err)
}

// Wrap returns fn guarded by e under name: the first invocation with an
// event's key runs fn and stores its result with the engine's Codec (JSON
// by default); a later invocation with the key returns the stored result
// (or the stored final error, see idemkit.WithErrorCodec) without running
// fn. The key comes from WithKeyPath or WithKeyFunc, one of which is
// required. name is the handler's own key space: 1 to MaxNameLen bytes of
// printable ASCII, stable across deploys.
//
// A concurrent duplicate gets an error wrapping idemkit.ErrInProgress (a
// *idemkit.ConflictError with a retry hint) unless the engine options
// include idemkit.WithWait. An event without a key gets an error wrapping
// ErrNoKey and idemkit.ErrInvalid, a repeat with other payload values one
// wrapping idemkit.ErrMismatch; fn does not run. Wrap returns an error
// wrapping idemkit.ErrInvalid for a nil engine or fn, a bad name, an
// invalid option or a refused WithDisableEnv switch.
func Wrap[In, Out any](e *idemkit.Engine, name string, fn Handler[In, Out], opts ...Option) (Handler[In, Out], error) {
	g, err := newGuard[In](e, name, kind{call: "Wrap"}, nil, opts)
	if err == nil && fn == nil {
		err = fmt.Errorf("idemlambda: Wrap: %w: nil handler", idemkit.ErrInvalid)
	}
	if err != nil {
		return nil, err
	}
	if g.off {
		return fn, nil
	}
	return func(ctx context.Context, in In) (Out, error) {
		out, _, err := invoke(ctx, g, in, fn)
		return out, err
	}, nil
}

// invoke runs one invocation of fn under g.
func invoke[In, Out any](ctx context.Context, g *guard[In], in In, fn Handler[In, Out]) (Out, idemkit.Result, error) {
	var zero Out
	ev := &event[In]{in: in}
	k, err := g.key(ev)
	if err != nil {
		return zero, idemkit.Result{}, err
	}
	fp, err := g.fingerprint(ev)
	if err != nil {
		return zero, idemkit.Result{}, err
	}
	opts, err := callOptions(ctx)
	if err != nil {
		return zero, idemkit.Result{}, err
	}
	run := func(ctx context.Context) (Out, error) { return fn(ctx, in) }
	out, res, err := idemkit.Do(ctx, g.view, g.storeKey(k), fp, run, opts...)
	return out, res, g.mismatch(err)
}
