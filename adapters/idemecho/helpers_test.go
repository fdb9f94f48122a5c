package idemecho_test

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemecho"
	"github.com/idemkit/idemkit/adapters/internal/httpconform"
)

// handle is the conformance handler in Echo's terms: c.Blob writes the
// answer, a failure is a returned error.
func handle(o *httpconform.Orders) echo.HandlerFunc {
	return func(c *echo.Context) error {
		r := o.Run()
		if r.Fail {
			return errors.New("handler failed")
		}
		h := c.Response().Header()
		h.Set("Location", r.Location)
		h.Set("X-Not-Replayed", "yes")
		return c.Blob(r.Status, "application/json", []byte(r.Body))
	}
}

// options turns a conformance config into idemecho's options, principal
// first.
func options(cfg httpconform.Config) []idemecho.Option {
	opts := []idemecho.Option{idemecho.WithPrincipal(idemecho.TrustedHeaderPrincipal(httpconform.UserHeader))}
	if cfg.MaxStored > 0 {
		opts = append(opts, idemecho.WithMaxStoredResponse(cfg.MaxStored))
	}
	if cfg.MaxBody > 0 {
		opts = append(opts, idemecho.WithMaxBody(cfg.MaxBody))
	}
	if cfg.Logger != nil {
		opts = append(opts, idemecho.WithLogger(cfg.Logger))
	}
	if cfg.OptionalKey {
		opts = append(opts, idemecho.WithOptionalKey())
	}
	if cfg.Engine != nil {
		opts = append(opts, idemecho.WithEngineOptions(cfg.Engine...))
	}
	if cfg.QuerySet {
		opts = append(opts, idemecho.WithQueryParams(cfg.Query...))
	}
	if cfg.Fingerprinter != nil {
		opts = append(opts, idemecho.WithFingerprinter(cfg.Fingerprinter))
	}
	if cfg.ReplayHeader != "" {
		opts = append(opts, idemecho.WithReplayHeader(cfg.ReplayHeader))
	}
	if cfg.Release {
		opts = append(opts, idemecho.WithUnstored(idemecho.ReleaseKey, idemecho.ReleaseKey))
	}
	if cfg.ProblemBase != "" {
		opts = append(opts, idemecho.WithProblemBase(cfg.ProblemBase))
	}
	if cfg.Wait > 0 {
		opts = append(opts, idemecho.WithWait(cfg.Wait))
	}
	return opts
}

// guard returns the middleware of cfg's mode.
func guard(t testing.TB, e *idemkit.Engine, cfg httpconform.Config, extra ...idemecho.Option) echo.MiddlewareFunc {
	t.Helper()
	ctor := map[httpconform.Mode]func(*idemkit.Engine, ...idemecho.Option) (echo.MiddlewareFunc, error){
		httpconform.Idempotency: idemecho.Idempotency, httpconform.Window: idemecho.Window, httpconform.Token: idemecho.Token,
	}[cfg.Mode]
	g, err := ctor(e, append(options(cfg), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serve is the conformance Framework: an Echo server on a loopback port.
func serve(t testing.TB, e *idemkit.Engine, o *httpconform.Orders, cfg httpconform.Config) string {
	t.Helper()
	g := guard(t, e, cfg)
	app := echo.New()
	app.POST("/orders/:id", handle(o), g)
	app.PUT("/orders/:id", handle(o), g)
	return listen(t, app)
}

// listen serves app on a loopback port until the test ends.
func listen(t testing.TB, app *echo.Echo) string {
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	return srv.URL
}
