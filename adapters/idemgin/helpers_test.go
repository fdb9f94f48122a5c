package idemgin_test

import (
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemgin"
	"github.com/idemkit/idemkit/adapters/internal/httpconform"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// handle is the conformance handler in gin's terms: gin's render writes
// the answer, a failure aborts with 500.
func handle(o *httpconform.Orders) gin.HandlerFunc {
	return func(c *gin.Context) {
		r := o.Run()
		if r.Fail {
			c.AbortWithStatus(500)
			return
		}
		c.Header("Location", r.Location)
		c.Header("X-Not-Replayed", "yes")
		c.Data(r.Status, "application/json", []byte(r.Body))
	}
}

// options turns a conformance config into idemgin's options, principal
// first.
func options(cfg httpconform.Config) []idemgin.Option {
	opts := []idemgin.Option{idemgin.WithPrincipal(idemgin.TrustedHeaderPrincipal(httpconform.UserHeader))}
	if cfg.MaxStored > 0 {
		opts = append(opts, idemgin.WithMaxStoredResponse(cfg.MaxStored))
	}
	if cfg.MaxBody > 0 {
		opts = append(opts, idemgin.WithMaxBody(cfg.MaxBody))
	}
	if cfg.Logger != nil {
		opts = append(opts, idemgin.WithLogger(cfg.Logger))
	}
	if cfg.OptionalKey {
		opts = append(opts, idemgin.WithOptionalKey())
	}
	if cfg.Engine != nil {
		opts = append(opts, idemgin.WithEngineOptions(cfg.Engine...))
	}
	if cfg.QuerySet {
		opts = append(opts, idemgin.WithQueryParams(cfg.Query...))
	}
	if cfg.Fingerprinter != nil {
		opts = append(opts, idemgin.WithFingerprinter(cfg.Fingerprinter))
	}
	if cfg.ReplayHeader != "" {
		opts = append(opts, idemgin.WithReplayHeader(cfg.ReplayHeader))
	}
	if cfg.Release {
		opts = append(opts, idemgin.WithUnstored(idemgin.ReleaseKey, idemgin.ReleaseKey))
	}
	if cfg.ProblemBase != "" {
		opts = append(opts, idemgin.WithProblemBase(cfg.ProblemBase))
	}
	if cfg.Wait > 0 {
		opts = append(opts, idemgin.WithWait(cfg.Wait))
	}
	return opts
}

// guard returns the middleware of cfg's mode.
func guard(t testing.TB, e *idemkit.Engine, cfg httpconform.Config, extra ...idemgin.Option) gin.HandlerFunc {
	t.Helper()
	ctor := map[httpconform.Mode]func(*idemkit.Engine, ...idemgin.Option) (gin.HandlerFunc, error){
		httpconform.Idempotency: idemgin.Idempotency, httpconform.Window: idemgin.Window, httpconform.Token: idemgin.Token,
	}[cfg.Mode]
	g, err := ctor(e, append(options(cfg), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serve is the conformance Framework: a gin engine on a loopback port.
func serve(t testing.TB, e *idemkit.Engine, o *httpconform.Orders, cfg httpconform.Config) string {
	t.Helper()
	g := guard(t, e, cfg)
	r := gin.New()
	r.POST("/orders/:id", g, handle(o))
	r.PUT("/orders/:id", g, handle(o))
	return listen(t, r)
}

// listen serves h on a loopback port until the test ends.
func listen(t testing.TB, r *gin.Engine) string {
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}
