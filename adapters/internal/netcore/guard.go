package netcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// Exchange is one request through a framework, as the guard needs it.
type Exchange interface {
	// Request returns the request; the guard may replace its Body with
	// the copy it read.
	Request() *http.Request
	// Writer returns the writer replays are written to.
	Writer() http.ResponseWriter
	// Route returns the route pattern the request matched ("" if none).
	Route() string
	// Next runs the rest of the chain and returns the status sent and the
	// chain's error. With rec, it writes through a writer that feeds rec;
	// with nil, through the framework's own.
	Next(rec *Recorder) (status int, err error)
}

// Outcome says what Serve did.
type Outcome uint8

// The outcomes of Serve.
const (
	// Ran: the rest of the chain ran and answered; its error is returned.
	Ran Outcome = iota + 1
	// Replayed: a stored response was written; the chain must stop.
	Replayed
	// Answered: the request gets the Answer; the chain must stop.
	Answered
)

// errNotStored ends a claim whose response the store policy refused.
var errNotStored = errors.New("response not stored")

// Guard runs one mode of one route.
type Guard struct {
	e  *idemkit.Engine
	c  *Config
	fp *keying.Fingerprinter
}

// New returns the guard of c over e, or an error wrapping
// idemkit.ErrInvalid.
func New(e *idemkit.Engine, c *Config) (*Guard, error) {
	view, err := e.With(c.EngineOpts...)
	if err != nil {
		return nil, fmt.Errorf("WithEngineOptions: %w", err)
	}
	fp := c.Fingerprinter
	if fp == nil {
		opts := []keying.Option{keying.WithVolatile(c.Volatile...)}
		if c.Mode == ModeWindow {
			opts = append(opts, keying.WithVolatile(keying.WindowVolatile()...))
		}
		if fp, err = keying.NewFingerprinter(opts...); err != nil {
			return nil, fmt.Errorf("%w: WithVolatile: %w", idemkit.ErrInvalid, err)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Guard{e: view, c: c, fp: fp}, nil
}

// Engine returns the engine the guard uses, with its options applied.
func (g *Guard) Engine() *idemkit.Engine { return g.e }

// Guarded reports whether requests of method are guarded.
func (g *Guard) Guarded(method string) bool { return slices.Contains(g.c.Methods, method) }

// Serve runs the guard's mode for x, whose caller is principal (non-empty).
func (g *Guard) Serve(x Exchange, principal string) (Outcome, Answer, error) {
	switch g.c.Mode {
	case ModeWindow:
		return g.window(x, principal)
	case ModeToken:
		return g.token(x, principal)
	}
	return g.key(x, principal)
}

func (g *Guard) key(x Exchange, principal string) (Outcome, Answer, error) {
	r := x.Request()
	key, present, err := httpcore.HeaderKey(r.Header[g.c.KeyHeader])
	switch {
	case err != nil:
		return Answered, Answer{Kind: httpcore.KindKeyInvalid, Detail: g.c.KeyHeader + ": " + err.Error()}, nil
	case !present && g.c.OptionalKey:
		_, err := x.Next(nil)
		return Ran, Answer{}, err
	case !present:
		return Answered, Answer{Kind: httpcore.KindKeyMissing, Detail: httpcore.DetailKeyMissing(g.c.KeyHeader)}, nil
	}
	body, a, ok := readBody(r, g.c.MaxBody)
	if !ok {
		return Answered, a, nil
	}
	// The fingerprint, the engine key and the scope share one string. The
	// principal scopes the key, so a record is only compared with the same
	// principal's requests: the fingerprint leaves it out.
	var text [128]byte
	var op [128]byte
	b := g.fp.AppendSum(text[:0], "", httpcore.Transient(appendOperation(op[:0], r, x.Route())), g.params(r, true), body.b)
	k := keying.AppendKey(b, g.c.Namespace, key)
	all := string(append(k, principal...))
	fp, engineKey, scope := all[:len(b)], all[len(b):len(k)], all[len(k):]
	ctx := r.Context()
	claim, res, err := g.e.Begin(ctx, engineKey, fp, idemkit.WithScope(scope))
	if claim != nil || (err == nil && res.Unguarded) {
		body.restore(r)
	} else {
		body.release()
	}
	switch {
	case claim != nil:
		return g.run(ctx, x, claim)
	case err != nil:
		return g.problem(ctx, x, err)
	case res.Unguarded:
		_, err := x.Next(nil)
		return Ran, Answer{}, err
	}
	return g.replay(ctx, x, res.Value)
}

// run runs the rest of the chain under claim and records its response
// when the store policy accepts it; otherwise the key is released.
func (g *Guard) run(ctx context.Context, x Exchange, claim *idemkit.Claim) (Outcome, Answer, error) {
	defer claim.Release(ctx) // a no-op once completed; releases on a panic
	rec := g.recorder()
	status, err := x.Next(rec)
	if err != nil {
		return Ran, Answer{}, err // the framework answers; the key is released
	}
	if value, ok := g.record(ctx, x, rec, status); ok {
		if err := claim.Complete(ctx, value); err != nil {
			g.warn(ctx, x, "handler ran but its response could not be recorded")
		}
	}
	return Ran, Answer{}, nil
}

func (g *Guard) recorder() *Recorder {
	return &Recorder{allow: g.c.ReplayHeaders, max: g.c.MaxStored}
}

// record returns what a claim keeps for the response rec saw, false when
// the claim is to be released instead.
func (g *Guard) record(ctx context.Context, x Exchange, rec *Recorder, status int) ([]byte, bool) {
	switch {
	case !g.c.StorePolicy(status):
		return nil, false
	case rec.streamed:
		return g.unstored(ctx, x, g.c.Streamed, httpcore.ReasonStreamed, "streamed response sent and not stored")
	case rec.over:
		return g.unstored(ctx, x, g.c.TooLarge, httpcore.ReasonTooLarge, "response over the stored-size cap sent and not stored",
			slog.Int("max_stored", g.c.MaxStored))
	}
	rec.Head(x.Writer().Header()) // a response without a body began at the end
	return rec.encode(status), true
}

// unstored logs and returns what a response that cannot be stored leaves
// (WithUnstored): a terminal record, or false to release the key.
func (g *Guard) unstored(ctx context.Context, x Exchange, u Unstored, reason httpcore.Reason, msg string, attrs ...slog.Attr) ([]byte, bool) {
	if u == ReleaseKey {
		g.warn(ctx, x, msg+"; the key is released", attrs...)
		return nil, false
	}
	g.warn(ctx, x, msg+"; repeats get 500 response-not-stored", attrs...)
	return httpcore.TerminalRecord(reason), true
}

// replay writes the stored value, or answers with the problem of a
// terminal record.
func (g *Guard) replay(ctx context.Context, x Exchange, value []byte) (Outcome, Answer, error) {
	if kind, why, ok := httpcore.Terminal(value); ok {
		return Answered, Answer{Kind: kind, Detail: why, Replayed: true}, nil
	}
	if err := WriteStored(x.Writer(), value, g.c.ReplayHeader); err != nil {
		g.c.Logger.ErrorContext(ctx, g.c.Namespace+": stored response cannot be decoded", "route", x.Route())
		return Answered, Answer{Kind: httpcore.KindInternal, Detail: "the stored response cannot be read"}, nil
	}
	return Replayed, Answer{}, nil
}

// problem maps an engine error met before the handler ran. The log line
// names no error text: store errors name store keys.
func (g *Guard) problem(ctx context.Context, x Exchange, err error) (Outcome, Answer, error) {
	if a, ok := common(err); ok {
		return Answered, a, nil
	}
	g.c.Logger.ErrorContext(ctx, g.c.Namespace+": unexpected engine outcome",
		"method", x.Request().Method, "route", x.Route())
	return Answered, Answer{Kind: httpcore.KindInternal, Detail: httpcore.DetailInternal}, nil
}

func (g *Guard) warn(ctx context.Context, x Exchange, msg string, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("method", x.Request().Method), slog.String("route", x.Route()))
	g.c.Logger.LogAttrs(ctx, slog.LevelWarn, g.c.Namespace+": "+msg, attrs...)
}

func (g *Guard) window(x Exchange, principal string) (Outcome, Answer, error) {
	r := x.Request()
	body, a, ok := readBody(r, g.c.MaxBody)
	if !ok {
		return Answered, a, nil
	}
	var text [64]byte
	var op [128]byte
	key := string(g.fp.AppendSum(append(append(text[:0], g.c.Namespace...), ':'), principal,
		httpcore.Transient(appendOperation(op[:0], r, x.Route())), g.params(r, false), body.b))
	ran := false
	var chainErr error
	ctx := r.Context()
	err := g.e.Guard(ctx, key, func(context.Context) error {
		ran = true
		body.restore(r)
		status, err := x.Next(&Recorder{})
		if err != nil {
			chainErr = err
			return err
		}
		if !g.c.StorePolicy(status) {
			return errNotStored
		}
		return nil
	}, idemkit.WithScope(principal))
	if ran {
		return Ran, Answer{}, chainErr
	}
	body.release()
	return g.problem(ctx, x, err) // fail-open runs fn too: err is set here
}

func (g *Guard) token(x Exchange, principal string) (Outcome, Answer, error) {
	r := x.Request()
	token, present, err := httpcore.HeaderKey(r.Header[g.c.TokenHeader])
	switch {
	case err != nil:
		return Answered, Answer{Kind: httpcore.KindTokenInvalid, Detail: g.c.TokenHeader + ": " + err.Error()}, nil
	case !present:
		return Answered, Answer{Kind: httpcore.KindTokenMissing, Detail: "this request requires an " + g.c.TokenHeader + " header"}, nil
	}
	ran := false
	var chainErr error
	ctx := r.Context()
	res, err := g.e.UseToken(ctx, principal, token, func(ctx context.Context) ([]byte, error) {
		ran = true
		rec := g.recorder()
		status, err := x.Next(rec)
		if err != nil {
			chainErr = err
			return nil, err
		}
		if value, ok := g.record(ctx, x, rec, status); ok {
			return value, nil
		}
		return nil, errNotStored
	})
	switch {
	case ran:
		if err != nil && chainErr == nil && !errors.Is(err, errNotStored) {
			g.warn(ctx, x, "handler ran but its response could not be recorded")
		}
		return Ran, Answer{}, chainErr
	case err != nil:
		return g.problem(ctx, x, err)
	case res.Unguarded:
		_, err := x.Next(nil)
		return Ran, Answer{}, err
	}
	return g.replay(ctx, x, res.Value)
}

func tooLarge(max int64) Answer {
	return Answer{Kind: httpcore.KindBodyTooLarge, Detail: fmt.Sprintf("the request body is over %d bytes", max)}
}

// appendOperation appends what the request does to dst: method, route
// pattern and escaped path, so one body sent to /orders/1 and /orders/2
// are different operations.
func appendOperation(dst []byte, r *http.Request, route string) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, ' ')
	dst = append(dst, route...)
	dst = append(dst, ' ')
	return append(dst, r.URL.EscapedPath()...)
}

// params returns the query parameters for the fingerprint, nil for none
// (httpcore.QueryParams under WithQueryParams).
func (g *Guard) params(r *http.Request, all bool) url.Values {
	return httpcore.QueryParams(r, g.c.Query, g.c.QuerySet, all)
}

// IssueProblem maps an error of Engine.IssueToken.
func (g *Guard) IssueProblem(ctx context.Context, err error) Answer {
	if a, ok := common(err); ok {
		return a
	}
	g.c.Logger.ErrorContext(ctx, g.c.Namespace+": tokens cannot be issued: unexpected engine outcome")
	return Answer{Kind: httpcore.KindInternal, Detail: httpcore.DetailInternal}
}
