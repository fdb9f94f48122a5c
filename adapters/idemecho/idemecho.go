package idemecho

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/netcore"
	"github.com/idemkit/idemkit/internal/options"
)

// namespace is the first part of every engine key this package makes.
const namespace = "echo"

// Idempotency returns Echo middleware that makes a route idempotent per
// client key: the first request with a key runs the next handler and its
// response is stored; a retry gets the stored response, a concurrent one
// 409, one with another payload 422. See the package doc. It returns an
// error wrapping idemkit.ErrInvalid for a nil engine, a missing principal
// or an invalid option.
func Idempotency(e *idemkit.Engine, opts ...Option) (echo.MiddlewareFunc, error) {
	return newGuard(e, netcore.ModeKey, opts)
}

// Window returns Echo middleware that answers a repeat of the same request
// (principal, method, route, path and canonical body; no client key)
// inside a time window with 409 duplicate and Retry-After. Nothing is
// stored or replayed. The window (idemkit.WithWindow) is an engine option,
// given with WithEngineOptions.
func Window(e *idemkit.Engine, opts ...Option) (echo.MiddlewareFunc, error) {
	return newGuard(e, netcore.ModeWindow, opts)
}

// Token returns Echo middleware that requires a one-time token issued to
// the same principal (TokenIssuer, or Engine.IssueToken) in the token
// header of every guarded request, and spends it before the next handler
// runs: the first use runs it; a reuse gets the stored response, or 409
// while the first runs or when its outcome was not stored; an unknown,
// expired or other principal's token gets 400.
func Token(e *idemkit.Engine, opts ...Option) (echo.MiddlewareFunc, error) {
	return newGuard(e, netcore.ModeToken, opts)
}

// build collects opts for mode m and returns the config and its guard.
func build(e *idemkit.Engine, m netcore.Mode, opts []Option) (*config, *netcore.Guard, error) {
	c := &config{core: netcore.NewConfig(m, namespace)}
	errs := options.Collect(c, opts)
	g, err := netcore.Build(e, &c.core, c.principal != nil, errs)
	return c, g, err
}

func newGuard(e *idemkit.Engine, m netcore.Mode, opts []Option) (echo.MiddlewareFunc, error) {
	c, g, err := build(e, m, opts)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ec *echo.Context) error {
			if (c.skipper != nil && c.skipper(ec)) || !g.Guarded(ec.Request().Method) {
				return next(ec)
			}
			principal, err := c.principal(ec)
			if err != nil || principal == "" {
				return c.answer(ec, g, netcore.Unauthenticated())
			}
			out, a, err := g.Serve(&exchange{c: ec, next: next}, principal)
			if out == netcore.Answered {
				return c.answer(ec, g, a)
			}
			return err
		}
	}, nil
}

// ProblemError is what every *echo.HTTPError the middleware returns
// (WithHTTPErrors) wraps: the problem it would have written.
type ProblemError struct {
	Problem Problem
}

// Error returns the problem's title and detail, which name no key, token
// or principal.
func (e *ProblemError) Error() string {
	return "idemecho: " + e.Problem.Title + ": " + e.Problem.Detail
}

// answer gives a's problem: written, or returned as an *echo.HTTPError.
func (c *config) answer(ec *echo.Context, g *netcore.Guard, a netcore.Answer) error {
	if !c.httpErrors {
		g.WriteProblem(ec.Response(), a)
		return nil
	}
	g.SetHeaders(ec.Response().Header(), a)
	return echo.NewHTTPError(a.Status(), a.Detail).Wrap(&ProblemError{Problem: g.Problem(a)})
}

// exchange is a request through Echo, as the guard sees it.
type exchange struct {
	c    *echo.Context
	next echo.HandlerFunc
}

func (x *exchange) Request() *http.Request      { return x.c.Request() }
func (x *exchange) Writer() http.ResponseWriter { return x.c.Response() }
func (x *exchange) Route() string               { return x.c.Path() }

// Next runs the next handler, through a writer that feeds rec when rec is
// set. An error the handler returns is the framework's to answer (its
// HTTPErrorHandler, after the middleware returns); the guard releases the
// key.
func (x *exchange) Next(rec *netcore.Recorder) (int, error) {
	if rec == nil {
		return 0, x.next(x.c)
	}
	inner := x.c.Response()
	w := netcore.NewWriter(inner, rec)
	x.c.SetResponse(w)
	defer x.c.SetResponse(inner)
	err := x.next(x.c)
	return w.Status(), err
}

// IssuedToken is the JSON body TokenIssuer answers with: Token, the
// one-time token to send back in the token header, and ExpiresIn, its
// lifetime in whole seconds.
type IssuedToken = netcore.IssuedToken

// TokenIssuer returns an Echo handler that issues a one-time token bound
// to the request's principal, answering 201 with an IssuedToken body and
// Cache-Control: no-store; 401 when the principal function fails, 503
// when the store does. Register it with the method you want.
func TokenIssuer(e *idemkit.Engine, opts ...Option) (echo.HandlerFunc, error) {
	c, g, err := build(e, netcore.ModeIssuer, opts)
	if err != nil {
		return nil, err
	}
	return func(ec *echo.Context) error {
		principal, err := c.principal(ec)
		if err != nil || principal == "" {
			return c.answer(ec, g, netcore.Unauthenticated())
		}
		body, a, ok := g.Issue(ec.Request().Context(), principal)
		if !ok {
			return c.answer(ec, g, a)
		}
		ec.Response().Header().Set("Cache-Control", "no-store")
		return ec.JSONBlob(http.StatusCreated, body)
	}, nil
}
