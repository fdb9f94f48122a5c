package idemgin

import (
	"bufio"
	"net"
	"net/http"
	"unsafe"

	"github.com/gin-gonic/gin"
	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/netcore"
	"github.com/idemkit/idemkit/internal/options"
)

// namespace is the first part of every engine key this package makes.
const namespace = "gin"

// Idempotency returns gin middleware that makes a route idempotent per
// client key: the first request with a key runs the rest of the chain and
// its response is stored; a retry gets the stored response, a concurrent
// one 409, one with another payload 422. See the package doc. It returns
// an error wrapping idemkit.ErrInvalid for a nil engine, a missing
// principal or an invalid option.
func Idempotency(e *idemkit.Engine, opts ...Option) (gin.HandlerFunc, error) {
	return newGuard(e, netcore.ModeKey, opts)
}

// Window returns gin middleware that answers a repeat of the same request
// (principal, method, route, path and canonical body; no client key)
// inside a time window with 409 duplicate and Retry-After. Nothing is
// stored or replayed. The window (idemkit.WithWindow) is an engine option,
// given with WithEngineOptions.
func Window(e *idemkit.Engine, opts ...Option) (gin.HandlerFunc, error) {
	return newGuard(e, netcore.ModeWindow, opts)
}

// Token returns gin middleware that requires a one-time token issued to
// the same principal (TokenIssuer, or Engine.IssueToken) in the token
// header of every guarded request, and spends it before the chain runs:
// the first use runs it; a reuse gets the stored response, or 409 while
// the first runs or when its outcome was not stored; an unknown, expired
// or other principal's token gets 400.
func Token(e *idemkit.Engine, opts ...Option) (gin.HandlerFunc, error) {
	return newGuard(e, netcore.ModeToken, opts)
}

// build collects opts for mode m and returns the config and its guard.
func build(e *idemkit.Engine, m netcore.Mode, opts []Option) (*config, *netcore.Guard, error) {
	c := &config{core: netcore.NewConfig(m, namespace)}
	errs := options.Collect(c, opts)
	g, err := netcore.Build(e, &c.core, c.principal != nil, errs)
	return c, g, err
}

func newGuard(e *idemkit.Engine, m netcore.Mode, opts []Option) (gin.HandlerFunc, error) {
	c, g, err := build(e, m, opts)
	if err != nil {
		return nil, err
	}
	mw := &middleware{g: g, principal: c.principal}
	return mw.handle, nil
}

type middleware struct {
	g         *netcore.Guard
	principal PrincipalFunc
}

func (m *middleware) handle(c *gin.Context) {
	if !m.g.Guarded(c.Request.Method) {
		return // gin goes on with the chain
	}
	principal, err := m.principal(c)
	if err != nil || principal == "" {
		abort(c, m.g, netcore.Unauthenticated())
		return
	}
	switch out, a, _ := m.g.Serve(&exchange{c: c}, principal); out {
	case netcore.Replayed:
		c.Abort()
	case netcore.Answered:
		abort(c, m.g, a)
	}
}

// abort answers with a's problem and stops the chain.
func abort(c *gin.Context, g *netcore.Guard, a netcore.Answer) {
	g.WriteProblem(c.Writer, a)
	c.Abort()
}

// exchange is a request through gin, as the guard sees it.
type exchange struct{ c *gin.Context }

func (x *exchange) Request() *http.Request      { return x.c.Request }
func (x *exchange) Writer() http.ResponseWriter { return x.c.Writer }
func (x *exchange) Route() string               { return x.c.FullPath() }

// Next runs the rest of the chain, through a writer that feeds rec when
// rec is set; the status is gin's, which the last WriteHeader before the
// body sets.
func (x *exchange) Next(rec *netcore.Recorder) (int, error) {
	if rec == nil {
		x.c.Next()
		return x.c.Writer.Status(), nil
	}
	inner := x.c.Writer
	x.c.Writer = &writer{ResponseWriter: inner, rec: rec}
	defer func() { x.c.Writer = inner }()
	x.c.Next()
	return inner.Status(), nil
}

// writer is gin's writer with every byte of the body, the headers it began
// with, and any flush or hijack seen by a Recorder.
type writer struct {
	gin.ResponseWriter
	rec *netcore.Recorder
}

func (w *writer) Write(b []byte) (int, error) {
	w.rec.Head(w.Header())
	w.rec.Body(b)
	return w.ResponseWriter.Write(b)
}

func (w *writer) WriteString(s string) (int, error) {
	w.rec.Head(w.Header())
	w.rec.Body(unsafe.Slice(unsafe.StringData(s), len(s))) // only read
	return w.ResponseWriter.WriteString(s)
}

func (w *writer) WriteHeaderNow() {
	w.rec.Head(w.Header())
	w.ResponseWriter.WriteHeaderNow()
}

func (w *writer) Flush() {
	w.rec.Stream()
	w.ResponseWriter.Flush()
}

func (w *writer) Hijack() (c net.Conn, rw *bufio.ReadWriter, err error) {
	w.rec.Stream()
	return w.ResponseWriter.Hijack()
}

// IssuedToken is the JSON body TokenIssuer answers with: Token, the
// one-time token to send back in the token header, and ExpiresIn, its
// lifetime in whole seconds.
type IssuedToken = netcore.IssuedToken

// TokenIssuer returns a gin handler that issues a one-time token bound to
// the request's principal, answering 201 with an IssuedToken body and
// Cache-Control: no-store; 401 when the principal function fails, 503
// when the store does. Register it with the method you want.
func TokenIssuer(e *idemkit.Engine, opts ...Option) (gin.HandlerFunc, error) {
	c, g, err := build(e, netcore.ModeIssuer, opts)
	if err != nil {
		return nil, err
	}
	return func(gc *gin.Context) {
		principal, err := c.principal(gc)
		if err != nil || principal == "" {
			abort(gc, g, netcore.Unauthenticated())
			return
		}
		body, a, ok := g.Issue(gc.Request.Context(), principal)
		if !ok {
			abort(gc, g, a)
			return
		}
		gc.Header("Cache-Control", "no-store")
		gc.Data(http.StatusCreated, "application/json", body)
	}, nil
}
