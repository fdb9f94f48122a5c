package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/cmd/internal/telemetry"
	"github.com/idemkit/idemkit/completer"
	"github.com/idemkit/idemkit/setup"
)

// shutdownTimeout bounds how long a graceful shutdown waits for in-flight
// requests before it closes their connections.
const shutdownTimeout = 10 * time.Second

// errUsage marks a command-line error; the message and usage were printed.
var errUsage = errors.New("usage error")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode reports err (when it was not reported already) and returns the
// process exit status: 0, 2 for a usage error, 1 for anything else.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "idemdemo:", err)
	return 1
}

// run runs the command line args: the storm subcommand, or the service
// until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "storm" {
		return runStorm(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "provider" {
		return runProvider(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stdout, newLogger(stderr, cfg.logLevel))
}

// defaultStoreURL is the store without -store or IDEMKIT_STORE: the
// embedded bbolt file, which keeps the orders too.
const defaultStoreURL = "bolt://idemdemo.db"

// config is the service's configuration, from its flags and the IDEMKIT_*
// environment variables.
type config struct {
	addr     string
	stack    setup.Config // store URL, fallback, failure mode, budget, near cache
	window   time.Duration
	lease    time.Duration
	logLevel slog.Level
	// provider is the payment provider's base URL for POST /orders/paid
	// ("": the route answers 503); crashHooks honours its pause hooks.
	provider   string
	crashHooks bool
	// completeEvery is the completer's interval (0: no completer), and
	// completeAfter how long ago an abandoned paid order must have been
	// placed for it to finish the order.
	completeEvery, completeAfter time.Duration
	// events is -events: where new orders are announced ("": nowhere).
	events string
	// notifySecretFile holds the shared secret of POST /pay/notify's
	// signatures ("": the route answers 503).
	notifySecretFile string
}

// defaultConfig is the configuration without flags or environment.
func defaultConfig() config {
	return config{
		addr:     "127.0.0.1:8080",
		stack:    setup.Config{Store: defaultStoreURL},
		window:   3 * time.Second,
		lease:    idemkit.DefaultLease,
		logLevel: slog.LevelInfo,

		completeEvery: 30 * time.Second,
		completeAfter: completer.DefaultOlderThan,
	}
}

// parseFlags parses the service's flags over the IDEMKIT_* environment
// variables (flags win). A bad flag or variable prints the error and the
// usage to stderr and returns an error wrapping errUsage. Store URLs are
// checked when the service starts, which opens them.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("idemdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	env, err := setup.FromEnv(os.Environ())
	if err != nil {
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return config{}, fmt.Errorf("%w: %w", errUsage, err)
	}
	if env.Store == "" {
		env.Store = cfg.stack.Store
	}
	cfg.stack = env
	fs.StringVar(&cfg.addr, "addr", cfg.addr, "listen `address`")
	fs.StringVar(&cfg.stack.Store, "store", cfg.stack.Store, "idempotency store `URL`: bolt:///path/file.db, mem://, redis://[:password@]host:port/db,\nrediss://..., redis+sentinel://host:26379,host:26380/master, redis+cluster://host:7000,host:7001,\npostgres://user:password@host:5432/db?create_table=true, mysql://... (or IDEMKIT_STORE)")
	fs.StringVar(&cfg.stack.Fallback, "fallback", cfg.stack.Fallback, "`URL` of a store answering while the store fails, such as mem:// (or IDEMKIT_FALLBACK; default none)")
	fs.Func("on-store-error", "`policy` when the store fails: closed (answer 503) or open (run unguarded) (or IDEMKIT_ON_STORE_ERROR; default closed)", flagFunc(&cfg.stack.OnStoreError, setup.ParseFailureMode))
	fs.Func("budget", "time `budget` of each store call, such as 100ms, or off (or IDEMKIT_BUDGET; default 1s for network stores, off for mem and bolt)", flagFunc(&cfg.stack.Budget, setup.ParseBudget))
	fs.Func("near-cache", "`keys` of settled results cached in process, or off (or IDEMKIT_NEAR_CACHE; default off)", flagFunc(&cfg.stack.NearCache, setup.ParseNearCache))
	fs.DurationVar(&cfg.window, "window", cfg.window, "dedup window of POST /orders/quick")
	fs.DurationVar(&cfg.lease, "lease", cfg.lease, "how long an in-progress request keeps its key after a crash")
	fs.TextVar(&cfg.logLevel, "log-level", cfg.logLevel, "log `level`: debug, info, warn or error")
	fs.StringVar(&cfg.provider, "provider", cfg.provider, "payment provider `URL` for POST /orders/paid, such as http://127.0.0.1:8090 (run idemdemo provider), or auto to start one (default none)")
	fs.BoolVar(&cfg.crashHooks, "crash-hooks", cfg.crashHooks, "honour the "+pauseAfterHeader+" and "+pauseForHeader+" test headers of POST /orders/paid and POST /pay/notify (crash tests only)")
	fs.DurationVar(&cfg.completeEvery, "complete-every", cfg.completeEvery, "how often the completer finishes paid orders abandoned mid-way (0: never)")
	fs.DurationVar(&cfg.completeAfter, "complete-after", cfg.completeAfter, "how long ago an abandoned paid order was placed before the completer finishes it")
	fs.StringVar(&cfg.events, "events", cfg.events, "announce each new order (order.placed) through the outbox to NATS JetStream at `URL` nats://host:port/subject (PostgreSQL stores only)")
	fs.StringVar(&cfg.notifySecretFile, "notify-secret-file", cfg.notifySecretFile, "`file` holding the payment provider's shared secret (at least 16 bytes) that signs POST /pay/notify (HMAC-SHA256, X-Signature: sha256=<hex>); without it the route answers 503")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, err
		}
		return config{}, fmt.Errorf("%w: %w", errUsage, err)
	}
	if err := checkConfig(cfg, fs.Args()); err != nil {
		fmt.Fprintln(stderr, err)
		fs.Usage()
		return config{}, fmt.Errorf("%w: %w", errUsage, err)
	}
	return cfg, nil
}

// checkConfig checks what single flags cannot: their combination and the
// absence of arguments.
func checkConfig(cfg config, rest []string) error {
	switch {
	case len(rest) > 0:
		return fmt.Errorf("unexpected argument %q", rest[0])
	case cfg.stack.Store == "":
		return errors.New("-store: empty URL")
	case cfg.window <= 0:
		return fmt.Errorf("-window %v: must be positive", cfg.window)
	case cfg.lease <= 0:
		return fmt.Errorf("-lease %v: must be positive", cfg.lease)
	case cfg.completeEvery < 0:
		return fmt.Errorf("-complete-every %v: must not be negative", cfg.completeEvery)
	case cfg.completeAfter < 0:
		return fmt.Errorf("-complete-after %v: must not be negative", cfg.completeAfter)
	case cfg.events != "":
		if _, err := parseEventsURL(cfg.events); err != nil {
			return err
		}
	}
	return nil
}

// usage prints the synopsis and the flags.
func usage(fs *flag.FlagSet) {
	out := fs.Output()
	fmt.Fprintln(out, "Usage:\n  idemdemo [flags]          run the order service\n  idemdemo storm [flags]    fire duplicate submissions at it (idemdemo storm -h)\n  idemdemo provider [flags] run the payment provider of POST /orders/paid (idemdemo provider -h)\n\nFlags:")
	fs.PrintDefaults()
}

// flagFunc returns a flag setter that parses with parse into dst.
func flagFunc[T any](dst *T, parse func(string) (T, error)) func(string) error {
	return func(v string) error {
		x, err := parse(v)
		if err != nil {
			return err
		}
		*dst = x
		return nil
	}
}

// newLogger returns a text logger on w at level; lines logged inside an
// engine call carry its trace_id and span_id.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(telemetry.TraceLog{Handler: slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})})
}

// serve runs the service until ctx is done, then shuts it down gracefully.
func serve(ctx context.Context, cfg config, stdout io.Writer, log *slog.Logger) error {
	if cfg.provider == autoProvider {
		url, stop, err := startProvider(ctx, os.Stderr)
		if err != nil {
			return err
		}
		defer stop()
		log.Info("payment provider started", "url", url)
		cfg.provider = url
	}
	svc, err := start(ctx, cfg, log)
	if err != nil {
		return err
	}
	printBanner(stdout, svc.url, cfg, svc.backend.describe())
	select {
	case err := <-svc.served:
		return fmt.Errorf("serve: %w", errors.Join(err, svc.stop()))
	case <-ctx.Done():
	}
	log.Info("shutting down: waiting for in-flight requests", "timeout", shutdownTimeout)
	return svc.shutdown(shutdownTimeout)
}

// service is a running order service.
type service struct {
	url     string // base URL, such as http://127.0.0.1:8080
	http    *http.Server
	backend *backend
	served  chan error // receives Serve's error once it returns
	// stopCompleter stops the completer and waits for its pass to end
	// (nil without one); stopRelay stops the outbox relay (-events).
	stopCompleter, stopRelay func()
	// handlers counts the handlers running, so that the backend is closed
	// only once they all returned.
	handlers *handlerGate
}

// start opens the store, builds the engine and the routes, and serves them
// on cfg.addr in the background.
func start(ctx context.Context, cfg config, log *slog.Logger) (*service, error) {
	be, err := openBackend(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	svc, err := startOn(be, cfg, log)
	if err != nil {
		return nil, errors.Join(err, be.Close())
	}
	return svc, nil
}

// startOn builds the routes over be and serves them on cfg.addr.
func startOn(be *backend, cfg config, log *slog.Logger) (*service, error) {
	var stopRelay func()
	if cfg.events != "" {
		if be.txOrders == nil {
			return nil, errors.New("-events: orders are announced through the outbox of a PostgreSQL store, without -fallback")
		}
		ev, _ := parseEventsURL(cfg.events) // checked with the flags
		var err error
		if stopRelay, err = startRelay(context.Background(), ev, be.pg, be.tel, log); err != nil {
			return nil, err
		}
		be.txOrders.events = ev.subject
	}
	handler, done, err := newAppCompleted(be, cfg, log)
	if err == nil {
		var svc *service
		if svc, err = listen(cfg.addr, handler, be, log); err == nil {
			svc.stopRelay = stopRelay
			svc.stopCompleter = startCompleter(done, be, cfg, log)
			return svc, nil
		}
	}
	if stopRelay != nil {
		stopRelay()
	}
	return nil, err
}

// newApp builds the engine over the backend's store, observed by the
// backend's OpenTelemetry wiring (metrics on GET /metrics, a span per
// engine call and per store operation, events logged to the backend's
// logger), and the routes over the engine and the backend's orders.
func newApp(be *backend, cfg config, log *slog.Logger) (http.Handler, error) {
	h, _, err := newAppCompleted(be, cfg, log)
	return h, err
}

// newAppCompleted is newApp, and the engine and functions the completer
// finishes abandoned paid orders with.
func newAppCompleted(be *backend, cfg config, log *slog.Logger) (http.Handler, completion, error) {
	opts := append(append([]idemkit.Option(nil), be.engineOpts...),
		idemkit.WithLease(cfg.lease),
		idemkit.WithObserver(be.tel.Observer))
	engine, err := idemkit.New(be.store, opts...)
	if err != nil {
		return nil, completion{}, err
	}
	var repo payRepo = &kvPayments{st: be.store}
	if be.txOrders != nil {
		repo = &pgPayments{db: be.txOrders.db, st: be.txOrders.st}
	}
	pay, err := newPayments(repo, cfg.provider, cfg.crashHooks, log)
	if err != nil {
		return nil, completion{}, err
	}
	pay.notify = &notifier{repo: &kvUnpaid{st: be.store}, crashHooks: cfg.crashHooks, log: log}
	if be.txOrders != nil {
		pg := &pgUnpaid{orders: be.txOrders}
		pay.notify.repo, pay.notify.pg = pg, pg
	}
	if cfg.notifySecretFile != "" {
		if pay.notify.secret, err = readNotifySecret(cfg.notifySecretFile); err != nil {
			return nil, completion{}, err
		}
		log.Info("POST /pay/notify checks callback signatures with the secret in", "file", cfg.notifySecretFile)
	}
	app, err := newTxHandler(engine, be.orders, be.txOrders, pay, cfg.window, log)
	if err != nil {
		return nil, completion{}, err
	}
	return be.tel.WithMetrics(app), completion{engine: engine, funcs: idemkit.Funcs{paidOrderOp: pay.resume}}, nil
}

// listen starts serving handler on addr.
func listen(addr string, handler http.Handler, be *backend, log *slog.Logger) (*service, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	gate := &handlerGate{}
	svc := &service{
		url: "http://" + displayAddr(ln.Addr()),
		http: &http.Server{
			Handler:           gate.wrap(handler),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second, // test hooks sleep up to 2 × 5 s
			IdleTimeout:       time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		backend:  be,
		served:   make(chan error, 1),
		handlers: gate,
	}
	go func() { svc.served <- svc.http.Serve(ln) }()
	return svc, nil
}

// shutdown stops accepting requests and waits up to timeout for those in
// flight. Requests still running then have their connections closed (and
// their contexts cancelled); the store is closed only once every handler
// has returned, so no request ever runs against a closed store.
func (s *service) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = fmt.Errorf("shutdown: %w", errors.Join(err, s.http.Close()))
	}
	<-s.served
	s.stopBackground()
	s.handlers.closeAndWait()
	return errors.Join(err, s.backend.Close())
}

// stopBackground stops the completer and the relay, if they run.
func (s *service) stopBackground() {
	for _, stop := range []func(){s.stopCompleter, s.stopRelay} {
		if stop != nil {
			stop()
		}
	}
}

// stop closes the server at once (after Serve failed), waits for the
// handlers still running, and closes the store.
func (s *service) stop() error {
	err := s.http.Close()
	s.stopBackground()
	s.handlers.closeAndWait()
	return errors.Join(err, s.backend.Close())
}

// handlerGate counts running handlers. Once closed it refuses new requests
// with 503, and closeAndWait returns when the last running one returned.
// The zero value is open; it is safe for concurrent use.
type handlerGate struct {
	mu      sync.Mutex
	running int
	closed  bool
	idle    chan struct{} // made by closeAndWait; closed when running drops to 0
}

// wrap returns next behind the gate.
func (g *handlerGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.enter() {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			writeProblem(w, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable, "the service is shutting down")
			return
		}
		defer g.exit()
		next.ServeHTTP(w, r)
	})
}

// enter admits a handler unless the gate is closed.
func (g *handlerGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.running++
	return true
}

// exit records that a handler returned.
func (g *handlerGate) exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	if g.running == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// closeAndWait closes the gate and waits until no handler runs.
func (g *handlerGate) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	if g.running == 0 {
		g.mu.Unlock()
		return
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	<-idle
}

// displayAddr returns addr as a client would dial it: an unspecified
// address (listening on every interface) is reached on the loopback.
func displayAddr(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
}

// printBanner tells the user what is served and how to try each mode.
func printBanner(w io.Writer, url string, cfg config, storeDesc string) {
	fmt.Fprintf(w, `idemdemo: order service listening on %[1]s
  store: %[2]s; dedup window: %[3]v
  caller: the %[4]s header, trusted as if an authenticating gateway had set it.
  This demo has no authentication of its own: do not expose it beyond localhost.

  POST /orders        create an order; Idempotency-Key header required, retries replay
  POST /orders/quick  create an order; the same body again within %[3]v gets 409
  POST /tokens        issue a one-time token for POST /orders/form (Idempotency-Token header)
  GET  /orders        your orders
  POST /orders/paid   an order with a payment step (reserve, charge, mark paid); needs -provider (a URL, or auto)
  POST /orders/unpaid an order paid later, by the provider's signed callback POST /pay/notify (needs -notify-secret-file)
  GET  /healthz       200 when the store answers
  GET  /metrics       idemkit's metrics (Prometheus format)
  GET  /problems/...  a page per problem type: open the "type" URI's path of an error
  GET  /              the browser page: open %[1]s/ and click duplicates yourself
  test hooks: X-Demo-Delay: 2s (before creating), X-Demo-Stall: 2s (after), X-Demo-Fail: 500

Try each line twice (the token line submits its form twice):
  curl -i %[1]s/orders -H '%[4]s: alice' -H 'Idempotency-Key: order-1' -d '{"sku":"book","qty":1}'
  curl -i %[1]s/orders/quick -H '%[4]s: alice' -d '{"sku":"pen","qty":2}'
  T=$(curl -s -X POST %[1]s/tokens -H '%[4]s: alice' | sed -E 's/.*"token":"([^"]*)".*/\1/'); for i in 1 2; do curl -i %[1]s/orders/form -H '%[4]s: alice' -H "Idempotency-Token: $T" -d '{"sku":"mug","qty":1}'; done
  curl -s %[1]s/orders -H '%[4]s: alice'

Ctrl+C stops it gracefully.
`, url, storeDesc, cfg.window, userHeader)
}
