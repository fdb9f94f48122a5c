package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/cmd/internal/telemetry"
)

// Problem types of the proxy's own errors; the middleware's are the
// idemhttp.Problem* constants.
const (
	problemBase            = "https://idemkit.dev/problems/proxy/"
	problemUpstreamDown    = problemBase + "upstream-unavailable" // 502
	problemUpstreamTimeout = problemBase + "upstream-timeout"     // 504
	problemUpstreamBroken  = problemBase + "upstream-broken"      // 502: the upstream broke off its response
	problemBodyTimeout     = problemBase + "body-timeout"         // 408: the request body was not read within body_timeout
	problemBodyTooLarge    = idemhttp.ProblemBodyTooLarge         // 413
)

// healthTimeout bounds the store check of the health endpoint.
const healthTimeout = 2 * time.Second

// proxy is the handler of one idemproxy instance. Its methods are safe for
// concurrent use.
type proxy struct {
	cfg *config
	// cut is cancelled when shutdown cuts off the requests still running
	// (serve): it ends their upstream calls, which the clients' going
	// away does not.
	cut      context.Context
	log      *slog.Logger
	rp       *httputil.ReverseProxy
	stores   *stores
	handler  http.Handler
	inflight sync.WaitGroup
	// reloadKeys reads the principal's key files again (SIGHUP).
	reloadKeys func() error

	// Counters reported by the health endpoint.
	streams  atomic.Uint64 // guarded responses that streamed (SSE) and passed through
	upgrades atomic.Uint64 // upgrade requests (WebSocket) on guarded routes, passed through
}

// newProxy builds the proxy for a checked configuration over opened stores.
func newProxy(cfg *config, st *stores, log *slog.Logger) (*proxy, error) {
	if err := checkUpstream(cfg.Upstream); err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	up, _ := url.Parse(cfg.Upstream)
	p := &proxy{cfg: cfg, log: log, stores: st, cut: context.Background()}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			originalPath(pr.In, pr.Out)
			pr.SetURL(up)
			pr.SetXForwarded()
		},
		Transport:      newTransport(cfg.UpstreamTimeout.Duration),
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BufferPool:     new(bufferPool),
	}
	principal, reload, err := newPrincipal(cfg.Principal)
	if err != nil {
		return nil, err
	}
	p.reloadKeys = reload
	tel, err := telemetry.New(idemkit.SlogObserver(log))
	if err != nil {
		return nil, err
	}
	st.instrument(tel) // a mem:// store's evictions and refusals reach /metrics
	mux := http.NewServeMux()
	fold := func(pattern string) string { return pattern }
	if !cfg.CaseSensitivePaths {
		fold = foldPattern
	}
	mux.HandleFunc(fold("GET "+cfg.HealthPath), p.health)
	mux.Handle(fold("GET "+cfg.MetricsPath), tel.Metrics)
	engines, err := p.engines(st, tel.Observer)
	if err != nil {
		return nil, err
	}
	patterns := map[string]bool{}
	for _, rc := range cfg.Routes {
		patterns[fold(rc.Match)] = true
	}
	for _, rc := range cfg.Routes {
		h, err := p.route(rc, engines, principal)
		if err != nil {
			return nil, fmt.Errorf("%w: route %s: %w", errConfig, rc.Match, err)
		}
		if err := register(mux, fold(rc.Match), h); err != nil {
			return nil, err
		}
		if root, ok := patternRoot(fold(rc.Match)); ok && !patterns[root] {
			patterns[root] = true
			if err := register(mux, root, h); err != nil {
				return nil, err
			}
		}
	}
	mux.Handle("/", p.limit(cfg.MaxBody, cfg.BodyTimeout.Duration, p.rp))
	p.handler = mux
	return p, nil
}

// bufferPool reuses the ReverseProxy's 32 KiB copy buffers, which it
// otherwise allocates (and the GC clears) for every response.
type bufferPool struct{ p sync.Pool }

func (bp *bufferPool) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (bp *bufferPool) Put(b []byte) { bp.p.Put(&b) }

// register adds a route to mux, turning ServeMux's panic on a conflicting
// pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: route %s: %v", errConfig, pattern, r)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// routeEngines are the engines routes pick from: over the primary store,
// and over the tiered store for routes with fallback.
type routeEngines struct{ primary, fallback *idemkit.Engine }

func (p *proxy) engines(st *stores, obs idemkit.Observer) (routeEngines, error) {
	var re routeEngines
	opts := []idemkit.Option{idemkit.WithNamespace(p.cfg.Namespace), idemkit.WithObserver(obs)}
	if p.cfg.keySecret != nil {
		opts = append(opts, idemkit.WithKeySecret(p.cfg.keySecret))
	}
	var err error
	if re.primary, err = idemkit.New(st.primary, opts...); err != nil {
		return re, err
	}
	if st.tiered != nil {
		re.fallback, err = idemkit.New(st.tiered, opts...)
	}
	return re, err
}

// route builds the handler of one configured route.
func (p *proxy) route(rc routeCfg, engines routeEngines, principal principalFunc) (http.Handler, error) {
	if rc.Mode == modePass {
		return p.limit(rc.MaxBody, rc.BodyTimeout.Duration, p.rp), nil
	}
	e := engines.primary
	if rc.Fallback {
		e = engines.fallback
	}
	method, _, _ := strings.Cut(rc.Match, " ")
	if s := rc.Signature; s != nil {
		signed, err := idemhttp.SignedPrincipal(idemhttp.Signature{Sender: s.Sender, Secret: s.secret, Header: s.Header,
			Prefix: s.Prefix, TimestampHeader: s.TimestampHeader, Tolerance: s.Tolerance.Duration, MaxBody: rc.MaxBody})
		if err != nil {
			return nil, fmt.Errorf("signature: %w", err)
		}
		principal = signed
	}
	opts := p.routeOptions(rc, method, principal)
	var guard func(http.Handler) http.Handler
	var err error
	switch rc.Mode {
	case modeIssueToken:
		// The issuer reads no body, but net/http would, after it: the
		// bound holds for that read too.
		issuer, err := idemhttp.TokenIssuer(e, opts...)
		if err != nil {
			return nil, err
		}
		return p.limit(rc.MaxBody, rc.BodyTimeout.Duration, issuer), nil
	case modeKey:
		guard, err = idemhttp.Idempotency(e, opts...)
	case modeWindow:
		guard, err = idemhttp.Window(e, opts...)
	case modeToken:
		guard, err = idemhttp.Token(e, opts...)
	}
	if err != nil {
		return nil, err
	}
	return p.limit(rc.MaxBody, rc.BodyTimeout.Duration, &guarded{p: p, guard: guard(http.HandlerFunc(p.forward)), cookies: rc.SetCookie,
		principal: principal}), nil
}

// routeOptions translates a route's configuration into middleware options.
func (p *proxy) routeOptions(rc routeCfg, method string, principal principalFunc) []idemhttp.Option {
	eopts := []idemkit.Option{}
	if rc.Failure == "open" {
		eopts = append(eopts, idemkit.WithFailureMode(idemkit.FailOpen))
	}
	if rc.Lease.Duration > 0 {
		eopts = append(eopts, idemkit.WithLease(rc.Lease.Duration))
	}
	if rc.Retention.Duration > 0 && !rc.Callback { // a callback route's retention goes to idemhttp.Callback
		eopts = append(eopts, idemkit.WithRetention(rc.Retention.Duration))
	}
	if rc.TokenTTL.Duration > 0 {
		eopts = append(eopts, idemkit.WithTokenTTL(rc.TokenTTL.Duration))
	}
	if rc.Mode == modeWindow {
		// A failed submit (5xx, upstream down) can be retried at once.
		eopts = append(eopts, idemkit.WithRelease(idemkit.ReleaseOnError))
		if rc.Window.Duration > 0 {
			eopts = append(eopts, idemkit.WithWindow(rc.Window.Duration))
		}
	}
	opts := []idemhttp.Option{
		idemhttp.WithPrincipal(principal),
		idemhttp.WithLogger(p.log),
		idemhttp.WithEngineOptions(eopts...),
	}
	if rc.Mode != modeIssueToken { // the issuer answers every method and reads no body
		opts = append(opts, idemhttp.WithMethods(method))
	}
	if rc.Mode == modeKey || rc.Mode == modeWindow || rc.TokenField != "" { // Token reads a body only for its form field
		opts = append(opts, idemhttp.WithMaxBody(rc.MaxBody))
	}
	headers := rc.ReplayHeaders
	if rc.SetCookie == cookieReplay {
		headers = append(headers[:len(headers):len(headers)], "Set-Cookie")
	}
	if len(headers) > 0 {
		opts = append(opts, idemhttp.WithReplayHeaders(headers...))
	}
	if rc.Wait {
		opts = append(opts, idemhttp.WithWait(0))
	}
	if rc.OptionalKey {
		opts = append(opts, idemhttp.WithOptionalKey())
	}
	if rc.TokenField != "" {
		opts = append(opts, idemhttp.WithTokenField(rc.TokenField))
	}
	if rc.PayloadWindow.Duration > 0 {
		opts = append(opts, idemhttp.WithPayloadWindow(rc.PayloadWindow.Duration))
	}
	if rc.MaxStored > 0 {
		opts = append(opts, idemhttp.WithMaxStoredResponse(rc.MaxStored))
	}
	if rc.Unstored == unstoredRelease && (rc.Mode == modeKey || rc.Mode == modeToken) {
		opts = append(opts, idemhttp.WithUnstored(idemhttp.ReleaseKey, idemhttp.ReleaseKey))
	}
	return append(opts, callbackOptions(rc)...)
}

// callbackOptions translates a route's callback settings (key_from,
// include, volatile, callback) into middleware options.
func callbackOptions(rc routeCfg) []idemhttp.Option {
	var opts []idemhttp.Option
	if rc.Callback {
		opts = append(opts, idemhttp.Callback(rc.Retention.Duration))
	}
	if kind, name, ok := strings.Cut(rc.KeyFrom, ":"); ok {
		switch kind {
		case "json":
			opts = append(opts, idemhttp.WithKeyFrom(idemhttp.KeyFromJSON(name)))
		case "header":
			opts = append(opts, idemhttp.WithKeyFrom(idemhttp.KeyFromHeader(name)))
		case "query":
			opts = append(opts, idemhttp.WithKeyFrom(idemhttp.KeyFromQuery(name)))
		}
	}
	if len(rc.Include) > 0 {
		opts = append(opts, idemhttp.WithInclude(rc.Include...))
	}
	if len(rc.Volatile) > 0 {
		opts = append(opts, idemhttp.WithVolatile(rc.Volatile...))
	}
	return opts
}

// limit bounds the request body: a larger one gets 413, before the
// upstream sees it when its length is declared, else from the middleware
// (guarded routes) or upstreamError when the forwarded body runs over. It
// bounds the time to read the body too (timeout, see bodyClock).
func (p *proxy) limit(n int64, timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			writeProblem(w, r, http.StatusRequestEntityTooLarge, problemBodyTooLarge, "Request body too large",
				fmt.Sprintf("the request body is over %d bytes", n))
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			bc := &bodyClock{ReadCloser: r.Body, rc: http.NewResponseController(w)}
			if bc.rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
				r = r.WithContext(context.WithValue(r.Context(), bodyClockKey{}, bc))
				r.Body = bc
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
		}
		next.ServeHTTP(w, r)
	})
}

// bodyClock is a request body read under a deadline on the connection
// (body_timeout), so that a client that sends it a byte at a time cannot
// hold the connection and its handler for as long as it likes. The
// deadline is lifted once the body has been read to the end: net/http
// then reads the connection in the background to notice the client going
// away, and a deadline passing there would cancel the request (and end a
// slow upstream's response) instead of bounding the body.
type bodyClock struct {
	io.ReadCloser
	rc       *http.ResponseController
	timedOut atomic.Bool
}

type bodyClockKey struct{}

func (bc *bodyClock) Read(p []byte) (int, error) {
	n, err := bc.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		_ = bc.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		bc.timedOut.Store(true)
	}
	return n, err
}

// bodyTimedOut reports whether r's body was cut off by body_timeout.
func bodyTimedOut(r *http.Request) bool {
	bc, _ := r.Context().Value(bodyClockKey{}).(*bodyClock)
	return bc != nil && bc.timedOut.Load()
}

// reqState is what the proxy learns about a guarded request while it is
// forwarded.
type reqState struct {
	stream  bool   // the upstream answers with a stream: let its flushes through
	cookies string // set_cookie of the route
	status  int    // the status the upstream answered with, once it has
	send    *sendLog
}

type stateKey struct{}

// guarded runs a guarded route: the idemhttp middleware around forward.
type guarded struct {
	p         *proxy
	guard     http.Handler
	cookies   string
	principal principalFunc
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isWebSocketHandshake(r) {
		// A protocol switch cannot be replayed: a real handshake passes
		// without a key, but only for an identified caller.
		if id, err := g.principal(r); err != nil || id == "" {
			writeProblem(w, r, http.StatusUnauthorized, idemhttp.ProblemUnauthenticated, "Unauthenticated",
				"the caller of this request could not be identified")
			return
		}
		g.p.upgrades.Add(1)
		g.p.log.WarnContext(r.Context(), "WebSocket handshake on a guarded route passed through without a key",
			"method", r.Method, "pattern", r.Pattern)
		g.p.rp.ServeHTTP(w, r)
		return
	}
	st := &reqState{cookies: g.cookies, send: new(sendLog)}
	g.guard.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
}

// forward sends a guarded request upstream. The ReverseProxy flushes
// every response without a Content-Length (chunked) as if it were a
// stream, which would make the middleware let it through unrecorded: the
// gate keeps those flushes from the middleware unless the upstream really
// streams (server-sent events). A guarded request is never a protocol
// switch: its Upgrade header is not forwarded, so the upstream answers it
// as an ordinary request, whose response is recorded.
//
// The upstream call does not end when the client goes away: the upstream
// may be doing the work, and the claim must be held (a retry meanwhile
// gets 409) until it answers, when its response is recorded. It is
// bounded instead: upstream_timeout to the response headers, and
// upstream_timeout more once the client has gone; shutdown's cut-off ends
// it at once (upstreamError then keeps the key if the request was sent). An upstream that breaks off a 2xx response leaves the key an
// "outcome unknown" record (brokenResponse).
func (p *proxy) forward(w http.ResponseWriter, r *http.Request) {
	st, _ := r.Context().Value(stateKey{}).(*reqState)
	ctx, cancel := p.upstreamContext(r.Context())
	defer cancel()
	if _, ok := r.Header["Upgrade"]; ok {
		r = r.Clone(ctx)
		r.Header.Del("Upgrade")
	} else {
		r = r.WithContext(ctx)
	}
	defer p.brokenResponse(w, r, st)
	p.rp.ServeHTTP(&flushGate{ResponseWriter: w, st: st}, r)
}

// upstreamContext returns the context of a guarded upstream call: reqCtx's
// values without its cancellation. It is cancelled by the cut-off
// (p.cut), upstream_timeout after reqCtx is done (the client went away),
// or by the returned function.
func (p *proxy) upstreamContext(reqCtx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(reqCtx))
	stopCut := context.AfterFunc(p.cut, cancel)
	var mu sync.Mutex
	var timer *time.Timer
	stopGone := context.AfterFunc(reqCtx, func() {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() == nil {
			timer = time.AfterFunc(p.cfg.UpstreamTimeout.Duration, cancel)
		}
	})
	return ctx, func() {
		stopCut()
		stopGone()
		cancel()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
	}
}

// brokenResponse, deferred by forward, handles the ReverseProxy's abort
// (http.ErrAbortHandler) when the upstream breaks off a response after its
// 2xx status: the upstream ran, so the key must not be released, as the
// abort would. It marks the outcome unknown (idemhttp.OutcomeUnknown) and
// answers 502 upstream-broken, or, when part of the response has gone to
// the client already, lets the abort go on, which cuts that response off;
// either way retries get the replayed outcome-unknown problem. Any other
// panic goes on as it is.
func (p *proxy) brokenResponse(w http.ResponseWriter, r *http.Request, st *reqState) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler && st != nil && st.status >= 200 && st.status < 300 {
		discarded, err := idemhttp.OutcomeUnknown(r)
		p.log.WarnContext(r.Context(), "upstream broke off its response; the key keeps an outcome-unknown record",
			"method", r.Method, "pattern", r.Pattern, "status", st.status)
		if err == nil && discarded {
			clear(w.Header())
			writeProblemRetry(w, r, http.StatusBadGateway, problemUpstreamBroken, "Upstream response broken",
				"the upstream service broke off its response; whether it processed the request is not known, so it is not processed again",
				false)
			return
		}
	}
	panic(v)
}

// isWebSocketHandshake reports whether r is a WebSocket opening handshake
// (RFC 6455 section 4.1): a GET without a body whose Connection names
// upgrade, whose Upgrade is websocket, with version 13 and a key of 16
// bytes in base64. Only such a request passes a guarded route without a
// key; any other, whatever its Connection and Upgrade headers, is guarded.
func isWebSocketHandshake(r *http.Request) bool {
	if r.Method != http.MethodGet || r.ContentLength != 0 || len(r.TransferEncoding) > 0 ||
		!hasToken(r.Header.Values("Connection"), "upgrade") || !hasToken(r.Header.Values("Upgrade"), "websocket") ||
		r.Header.Get("Sec-WebSocket-Version") != "13" {
		return false
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0]))
	return err == nil && len(b) == 16
}

// hasToken reports whether the comma-separated header values hold token,
// compared without case.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// flushGate passes flushes on only for a streamed response.
type flushGate struct {
	http.ResponseWriter
	st *reqState
}

// FlushError flushes when the response is a stream, else does nothing.
func (g *flushGate) FlushError() error {
	if g.st == nil || !g.st.stream {
		return nil
	}
	return http.NewResponseController(g.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (g *flushGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// modifyResponse applies a guarded route's response rules: streams are
// marked (and reported), Set-Cookie stripped when the route says so.
func (p *proxy) modifyResponse(res *http.Response) error {
	st, _ := res.Request.Context().Value(stateKey{}).(*reqState)
	if st == nil {
		return nil
	}
	st.status = res.StatusCode
	if st.cookies == cookieStrip {
		res.Header.Del("Set-Cookie")
	}
	if ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); ct == "text/event-stream" {
		st.stream = true
		p.streams.Add(1)
		p.log.WarnContext(res.Request.Context(), "streamed response on a guarded route passed through unguarded",
			"method", res.Request.Method, "path", res.Request.URL.Path)
	}
	return nil
}

// upstreamError answers a request the upstream did not answer: 413 for a
// body over the cap, 504 for a timeout, else 502. On a guarded route the
// request may have reached the upstream and run there once any of it was
// written on a connection (sendLog), whatever ended the call: a timeout, a
// lost connection, or shutdown's cut-off. The proxy cannot tell, so the
// key is not released but keeps an "outcome unknown" record
// (idemhttp.OutcomeUnknown), and the answer says a retry cannot succeed.
// Otherwise (the connection could not be opened, its TLS certificate was
// refused, or the call was cut off before it had one) nothing is stored:
// a retry reaches the upstream again.
func (p *proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var tooLarge *http.MaxBytesError
	var ne net.Error
	if errors.As(err, &tooLarge) {
		writeProblem(w, r, http.StatusRequestEntityTooLarge, problemBodyTooLarge, "Request body too large",
			fmt.Sprintf("the request body is over %d bytes", tooLarge.Limit))
		return
	}
	if bodyTimedOut(r) {
		writeProblemRetry(w, r, http.StatusRequestTimeout, problemBodyTimeout, "Request body too slow",
			"the request body did not arrive within the time allowed", false)
		return
	}
	retryable := true
	if st, _ := r.Context().Value(stateKey{}).(*reqState); st != nil && st.send.maybeSent() {
		if _, merr := idemhttp.OutcomeUnknown(r); merr == nil {
			retryable = false
		}
	}
	cut := p.cut.Err() != nil
	switch {
	case cut:
		writeProblemRetry(w, r, http.StatusBadGateway, problemUpstreamDown, "Upstream call cut off",
			"the proxy is shutting down and cut off the upstream call before it answered", retryable)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		writeProblemRetry(w, r, http.StatusGatewayTimeout, problemUpstreamTimeout, "Upstream timeout",
			"the upstream service did not answer in time", retryable)
	case errors.Is(err, errNotResent):
		writeProblemRetry(w, r, http.StatusBadGateway, problemUpstreamDown, "Upstream connection lost",
			"the connection to the upstream service failed after the request was sent", retryable)
	default:
		writeProblemRetry(w, r, http.StatusBadGateway, problemUpstreamDown, "Upstream unavailable",
			"the upstream service could not be reached", retryable)
	}
	p.log.WarnContext(r.Context(), "upstream error", "method", r.Method, "path", r.URL.Path,
		"outcome_unknown", !retryable, "cut_off", cut, "error", err)
}

// upstreamRetry is the Retry-After of the proxy's 502 and 504 answers.
const upstreamRetry = time.Second

// writeProblem answers with an RFC 9457 problem with the members idemhttp
// writes: a urn:uuid instance, and retryable (with Retry-After) for the
// upstream's failures, which nothing stored and a retry may fix.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, typ, title, detail string) {
	writeProblemRetry(w, r, status, typ, title, detail, status == http.StatusBadGateway || status == http.StatusGatewayTimeout)
}

// writeProblemRetry is writeProblem with retryable (and Retry-After) as
// given, written by idemhttp.WriteProblem as the middleware writes its
// own.
func writeProblemRetry(w http.ResponseWriter, r *http.Request, status int, typ, title, detail string, retryable bool) {
	var retry time.Duration
	if retryable {
		retry = upstreamRetry
	}
	idemhttp.WriteProblem(w, &idemhttp.Problem{Type: typ, Title: title, Status: status, Detail: detail,
		Instance: idemhttp.UUIDInstance(r), Retryable: &retryable}, retry)
}

// health answers the proxy's own health check: the store, and what went
// through unguarded. It never reaches the upstream.
func (p *proxy) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	status, code := "ok", http.StatusOK
	if err := p.stores.ping(ctx); err != nil {
		status, code = "store unavailable", http.StatusServiceUnavailable
	}
	body, _ := json.Marshal(map[string]any{
		"status":             status,
		"streams_unguarded":  p.streams.Load(),
		"upgrades_unguarded": p.upgrades.Load(),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

// ServeHTTP serves a request, counted for graceful shutdown.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.inflight.Add(1)
	defer p.inflight.Done()
	r, ok := p.normalized(w, r)
	if !ok {
		return
	}
	p.handler.ServeHTTP(w, r)
}
