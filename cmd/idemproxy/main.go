package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idemkit/idemkit/store"

	"github.com/idemkit/idemkit/cmd/internal/telemetry"
)

// errUsage marks a command-line error; the message and usage were printed.
var errUsage = errors.New("usage error")

// cutOffWait bounds how long shutdown waits, after cutting off the requests
// that outlived shutdown_timeout, for them to settle their keys.
const cutOffWait = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "idemproxy:", err)
	os.Exit(1)
}

// run loads the configuration and serves until ctx is done. ready, when
// not nil, receives the listening address once the proxy accepts
// connections.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, ready chan<- string) error {
	cfg, check, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)
	if check {
		return checkFiles(cfg, log)
	}
	st, err := openStores(ctx, cfg.Store, cfg.StoreBudget.Duration, cfg.fallback(), log)
	if err != nil {
		return err
	}
	defer st.Close()
	p, err := newProxy(cfg, st, log)
	if err != nil {
		return err
	}
	ln, err := listen(cfg)
	if err != nil {
		return err
	}
	log.Info("idemproxy listening", "addr", ln.Addr().String(), "upstream", cfg.Upstream,
		"store", store.Redact(cfg.Store), "routes", len(cfg.Routes))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	stopHUP := p.reloadOnHUP(ctx)
	defer stopHUP()
	return p.serve(ctx, ln)
}

// reloadOnHUP reloads the principal's key files (a rotated JWKS, say) on
// each SIGHUP until ctx is done or the returned function is called. A
// reload that fails keeps the current keys.
func (p *proxy) reloadOnHUP(ctx context.Context) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := p.reloadKeys(); err != nil {
					p.log.Error("key reload failed; the current keys stay", "error", err)
				} else {
					p.log.Info("key files reloaded")
				}
			}
		}
	}()
	return func() { signal.Stop(hup); cancel() }
}

// loadConfig reads the flags, the environment and the file. check reports
// -check: validate and exit.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (cfg *config, check bool, err error) {
	fs := flag.NewFlagSet("idemproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", getenv("IDEMPROXY_CONFIG"), "configuration file (TOML); env IDEMPROXY_CONFIG")
	listenAddr := fs.String("listen", "", "listen address, overrides the file; env IDEMPROXY_LISTEN")
	upstream := fs.String("upstream", "", "upstream URL, overrides the file; env IDEMPROXY_UPSTREAM")
	storeURL := fs.String("store", "", "store URL (mem://, redis://, postgres://, mysql://), overrides the file; env IDEMPROXY_STORE or IDEMKIT_STORE")
	fs.BoolVar(&check, "check", false, "validate the configuration and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, false, err
		}
		return nil, false, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idemproxy: unexpected argument %q\n", fs.Arg(0))
		return nil, false, errUsage
	}
	c := defaults()
	if *path != "" {
		if err := loadFile(&c, *path); err != nil {
			return nil, false, err
		}
	}
	c.fromEnv(getenv)
	for dst, v := range map[*string]string{&c.Listen: *listenAddr, &c.Upstream: *upstream, &c.Store: *storeURL} {
		if v != "" {
			*dst = v
		}
	}
	if err := c.check(); err != nil {
		return nil, false, err
	}
	if err := c.loadKeySecret(getenv); err != nil {
		return nil, false, err
	}
	return &c, check, nil
}

// checkFiles loads the key and certificate files the configuration names,
// for -check.
func checkFiles(cfg *config, log *slog.Logger) error {
	if _, _, err := newPrincipal(cfg.Principal); err != nil {
		return err
	}
	if cfg.TLS.CertFile != "" {
		if _, err := tlsConfig(cfg.TLS); err != nil {
			return err
		}
	}
	log.Info("configuration is valid", "routes", len(cfg.Routes))
	return nil
}

// fallback reports whether any route falls back to memory.
func (c *config) fallback() bool {
	for _, r := range c.Routes {
		if r.Fallback {
			return true
		}
	}
	return false
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(telemetry.TraceLog{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})})
}

// listen opens the listener, with TLS (and client certificates) when
// configured.
func listen(cfg *config) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.TLS.CertFile == "" {
		return ln, nil
	}
	tc, err := tlsConfig(cfg.TLS)
	if err != nil {
		return nil, errors.Join(err, ln.Close())
	}
	return tls.NewListener(ln, tc), nil
}

// tlsConfig loads the server certificate and, for mTLS, the client CA.
// A client certificate is verified when given; routes that need a
// principal answer 401 without one.
func tlsConfig(c tlsCfg) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls: %v", errConfig, err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pem, err := readSecretFile("tls.client_ca_file", c.ClientCAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: tls.client_ca_file: no PEM certificate", errConfig)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// serve serves ln until ctx is done, then shuts down gracefully: no new
// connections, in-flight requests finish within shutdown_timeout; those
// still running then are cut off: their upstream calls are cancelled, and
// their keys settled at once rather than left to their lease (released
// when the request had not been sent upstream, else kept with an
// outcome-unknown record, since the upstream may have done the work).
func (p *proxy) serve(ctx context.Context, ln net.Listener) error {
	base, cutOff := context.WithCancel(context.WithoutCancel(ctx))
	defer cutOff()
	p.cut = base // set before the first request is served
	srv := &http.Server{
		Handler:           p,
		ReadHeaderTimeout: p.cfg.ReadHeaderTimeout.Duration, // the body: body_timeout, per route (limit)
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	p.log.Info("shutting down: waiting for in-flight requests", "timeout", p.cfg.ShutdownTimeout.Duration)
	sctx, cancel := context.WithTimeout(context.Background(), p.cfg.ShutdownTimeout.Duration)
	defer cancel()
	err := srv.Shutdown(sctx) // hijacked connections (WebSocket) are not waited for here
	if !p.drained(sctx.Done()) {
		p.log.Warn("requests outlived the shutdown timeout: cutting them off (keys of requests sent upstream keep an outcome-unknown record, the others are released)")
		cutOff()
		wctx, wcancel := context.WithTimeout(context.Background(), cutOffWait)
		defer wcancel()
		if !p.drained(wctx.Done()) {
			p.log.Error("requests still running after the cut-off; their claims end with their lease")
		}
		// A handler that returned has not necessarily sent its answer
		// (net/http flushes it afterwards): let the connections go idle
		// before closing them, or the cut-off requests get EOF, not 502.
		_ = srv.Shutdown(wctx)
	}
	_ = srv.Close()
	p.log.Info("idemproxy stopped")
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// drained waits for every request handler to return, or for stop.
func (p *proxy) drained(stop <-chan struct{}) bool {
	done := make(chan struct{})
	go func() { p.inflight.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-stop:
		return false
	}
}
