package idemfiber

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"

	"github.com/gofiber/fiber/v3"
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/keying"
)

// maxReplayHeaders bounds the replay allow-list.
const maxReplayHeaders = 64

// New returns Fiber middleware that makes a route idempotent per client
// key over e; see the package doc for the contract. WithPrincipal is
// required. It returns an error wrapping idemkit.ErrInvalid for a nil
// engine, a missing principal or an invalid option (engine options
// included). The handler is safe for concurrent use.
func New(e *idemkit.Engine, opts ...Option) (fiber.Handler, error) {
	if e == nil {
		return nil, fmt.Errorf("idemfiber: %w: nil engine", idemkit.ErrInvalid)
	}
	c := &config{
		keyHeader:     DefaultKeyHeader,
		methods:       []string{http.MethodPost, http.MethodPatch},
		replayHeaders: httpcore.DefaultReplayHeaders(),
		storePolicy:   DefaultStorePolicy,
		maxStored:     DefaultMaxStoredResponse,
	}
	errs := options.Collect(c, opts)
	if c.principal == nil {
		errs = append(errs, errors.New("WithPrincipal is required"))
	}
	if c.keyFrom != nil && c.keyHeaderSet {
		errs = append(errs, errors.New("WithKeyFrom and WithKeyHeader cannot be combined: use KeyFromHeader"))
	}
	errs = append(errs, c.checkCallback()...)
	if len(c.replayHeaders) > maxReplayHeaders {
		errs = append(errs, fmt.Errorf("WithReplayHeaders: more than %d replay headers", maxReplayHeaders))
	}
	if err := options.Invalid(errs...); err != nil {
		return nil, fmt.Errorf("idemfiber: %w", err)
	}
	view, err := e.With(c.engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemfiber: WithEngineOptions: %w", err)
	}
	fpOpts := []keying.Option{keying.WithVolatile(c.volatile...)}
	if len(c.include) > 0 {
		fpOpts = append(fpOpts, keying.WithInclude(c.include...))
	}
	fp, err := keying.NewFingerprinter(fpOpts...)
	if err != nil {
		return nil, fmt.Errorf("idemfiber: %w: %w", idemkit.ErrInvalid, err)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	m := &middleware{e: view, c: c, fp: fp, bodyless: c.callback && len(c.volatile) == 0 && len(c.include) == 0}
	return m.handle, nil
}

type middleware struct {
	e  *idemkit.Engine
	c  *config
	fp *keying.Fingerprinter
	// bodyless leaves the body and query out of the fingerprint: a
	// callback route that names no members.
	bodyless bool
}

func (m *middleware) guarded(method string) bool {
	return slices.Contains(m.c.methods, method)
}

func (m *middleware) handle(c fiber.Ctx) error {
	method := c.Method()
	if !m.guarded(method) {
		return c.Next()
	}
	principal, err := m.c.principal(c)
	if err != nil || principal == "" {
		return writeProblem(c, httpcore.KindUnauthenticated, httpcore.DetailUnauthenticated, 0)
	}
	key, present, err := m.key(c)
	switch {
	case err != nil:
		return writeProblem(c, httpcore.KindKeyInvalid, m.keyWhere()+": "+err.Error(), 0)
	case !present && m.c.optionalKey:
		return c.Next()
	case !present && m.c.keyFrom != nil:
		return writeProblem(c, httpcore.KindKeyMissing, "this request requires an idempotency key in its "+m.keyWhere(), 0)
	case !present:
		return writeProblem(c, httpcore.KindKeyMissing, httpcore.DetailKeyMissing(m.c.keyHeader), 0)
	}
	ctx := c.Context()
	// The fingerprint, the engine key and the scope share one string. The
	// scope is a copy: the principal function may return a string over
	// fasthttp's request memory (c.Get), which the engine must not keep
	// (its scope cache outlives the request). The operation and the key
	// are read in place: AppendSum and AppendKey copy what they use. The
	// principal scopes the key, so a record is only ever compared with the
	// same principal's requests: the fingerprint leaves it out, which keeps
	// a small request's hash input within one block.
	var text [128]byte
	var opText [96]byte
	op := appendOperation(opText[:0], method, c)
	params, body := query(c), c.BodyRaw()
	if m.bodyless {
		params, body = nil, nil
	}
	b := m.fp.AppendSum(text[:0], "", httpcore.Transient(op), params, body)
	k := keying.AppendKey(b, "fiber", httpcore.Transient(key))
	all := string(append(k, principal...))
	fp, engineKey, scope := all[:len(b)], all[len(b):len(k)], all[len(k):]
	claim, res, err := m.e.Begin(ctx, engineKey, fp, idemkit.WithScope(scope))
	switch {
	case claim != nil:
		return m.run(ctx, c, claim)
	case err != nil:
		return m.answer(c, err)
	case res.Unguarded:
		return c.Next()
	}
	if kind, why, ok := httpcore.Terminal(res.Value); ok {
		return replayProblem(c, kind, why)
	}
	if err := writeStored(c.Response(), res.Value); err != nil {
		m.c.logger.ErrorContext(ctx, "idemfiber: stored response cannot be decoded", "error", err)
		return writeProblem(c, httpcore.KindInternal, "the stored response cannot be read", 0)
	}
	return nil
}

// key reads the request's key from the key header or WithKeyFrom's
// source. A key from the header is a view of the request's memory.
func (m *middleware) key(c fiber.Ctx) ([]byte, bool, error) {
	if m.c.keyFrom == nil {
		return httpcore.HeaderKey(c.Request().Header.PeekAll(m.c.keyHeader))
	}
	k, present, err := m.c.keyFrom.read(c)
	return []byte(k), present, err
}

// keyWhere names where the key is read from, for problem details.
func (m *middleware) keyWhere() string {
	if m.c.keyFrom == nil {
		return m.c.keyHeader
	}
	return m.c.keyFrom.what
}

// run runs the rest of the chain under claim and records its response
// when the store policy accepts it; otherwise the key is released.
func (m *middleware) run(ctx context.Context, c fiber.Ctx, claim *idemkit.Claim) error {
	defer claim.Release(ctx) // a no-op once completed; releases on a panic
	if err := c.Next(); err != nil {
		return err // Fiber's error handler answers; the key is released
	}
	resp := c.Response()
	if !m.c.storePolicy(resp.StatusCode()) {
		return nil
	}
	if m.c.callback && (resp.IsBodyStream() || len(resp.Body()) > m.c.maxStored) {
		// A handled callback is answered 2xx on every retry, even when
		// its body cannot be kept: its status and headers are stored.
		if err := claim.Complete(ctx, encodeBodyless(resp, m.c.replayHeaders)); err != nil {
			m.warn(ctx, c, "idemfiber: handler ran but its response could not be recorded", slog.Any("error", err))
		}
		return nil
	}
	if resp.IsBodyStream() {
		return nil
	}
	if len(resp.Body()) > m.c.maxStored {
		m.warn(ctx, c, "idemfiber: response over the stored-size cap sent and not stored; repeats get 500 response-not-stored", slog.Int("max_stored", m.c.maxStored))
		if err := claim.Complete(ctx, httpcore.TerminalRecord(httpcore.ReasonTooLarge)); err != nil {
			m.warn(ctx, c, "idemfiber: the key's not-stored record could not be written", slog.Any("error", err))
		}
		return nil
	}
	if err := claim.Complete(ctx, encodeResponse(resp, m.c.replayHeaders)); err != nil {
		m.warn(ctx, c, "idemfiber: handler ran but its response could not be recorded", slog.Any("error", err))
	}
	return nil
}

// answer maps an engine error met before the handler ran.
func (m *middleware) answer(c fiber.Ctx, err error) error {
	var ce *idemkit.ConflictError
	switch {
	case errors.Is(err, idemkit.ErrMismatch):
		return writeProblem(c, httpcore.KindKeyMismatch, httpcore.DetailKeyMismatch, 0)
	case errors.As(err, &ce) && errors.Is(err, idemkit.ErrInProgress):
		return writeProblem(c, httpcore.KindInProgress, httpcore.DetailInProgress, ce.RetryAfter)
	case errors.Is(err, idemkit.ErrResultTooLarge):
		// The engine's terminal record (idemkit.WithOversized): the
		// handler ran, its response was over the engine's result cap.
		return replayProblem(c, httpcore.KindResponseNotStored, httpcore.DetailTooLarge)
	case errors.Is(err, idemkit.ErrUnavailable), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return writeProblem(c, httpcore.KindUnavailable, httpcore.DetailUnavailable, httpcore.UnavailableRetry)
	}
	m.c.logger.ErrorContext(c.Context(), "idemfiber: unexpected engine outcome", "error", err,
		"method", c.Method(), "route", c.Route().Path)
	return writeProblem(c, httpcore.KindInternal, httpcore.DetailInternal, 0)
}

func (m *middleware) warn(ctx context.Context, c fiber.Ctx, msg string, attrs ...slog.Attr) {
	attrs = append(attrs, slog.String("method", c.Method()), slog.String("route", c.Route().Path))
	m.c.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// appendOperation appends what the request does to dst: method (c's),
// route path and path, so one body sent to /orders/1 and /orders/2 are
// different operations.
func appendOperation(dst []byte, method string, c fiber.Ctx) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, c.Route().Path...)
	dst = append(dst, ' ')
	return append(dst, c.Request().URI().PathOriginal()...)
}

// query returns the query parameters for the fingerprint, nil for none.
func query(c fiber.Ctx) url.Values {
	args := c.Request().URI().QueryArgs()
	if args.Len() == 0 {
		return nil
	}
	q := make(url.Values, args.Len())
	for k, v := range args.All() {
		q[string(k)] = append(q[string(k)], string(v))
	}
	return q
}
