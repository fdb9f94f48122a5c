package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/store"
)

// The payment provider (idemdemo provider): a loopback HTTP service that
// stands for a card processor. POST /charges is behind idemkit's
// Idempotency-Key middleware over a store of its own, and fenced: it keeps
// the highest fencing token (Idempotency-Fence) it has seen per key and
// refuses a lower one with 409, before the middleware runs. GET /charges
// reports what it did, for tests and the curious.

// providerMerchant is the provider's only caller: the order service.
const providerMerchant = "idemdemo"

// provider is the payment provider's state. Its fences and counts live in
// process memory, for the provider's lifetime.
type provider struct {
	mu      sync.Mutex
	fences  map[string]uint64 // idempotency key -> highest token seen
	charged map[string]int    // idempotency key -> charges made
	ids     []string
	calls   int // charge requests that passed the fence
	stale   int // charge requests refused for a lower token
}

// ProviderStats is GET /charges: calls that passed the fence, charges
// made (the handler ran), keys charged, keys charged more than once, calls
// refused for a stale fencing token, and the charge IDs.
type ProviderStats struct {
	Calls         int      `json:"calls"`
	Charges       int      `json:"charges"`
	Keys          int      `json:"keys"`
	DoubleCharged int      `json:"double_charged"`
	StaleFences   int      `json:"stale_fences"`
	IDs           []string `json:"ids"`
}

// runProvider runs idemdemo provider [-addr] [-store] [-log-level] until
// ctx is done.
func runProvider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("idemdemo provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen `address`")
	storeURL := fs.String("store", "mem://", "the provider's own idempotency store `URL`")
	level := slog.LevelInfo
	fs.TextVar(&level, "log-level", level, "log `level`: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return fmt.Errorf("%w: unexpected argument", errUsage)
	}
	log := newLogger(stderr, level)
	st, err := store.Open(ctx, *storeURL)
	if err != nil {
		return err
	}
	if c, ok := st.(store.Closer); ok {
		defer c.Close()
	}
	h, err := newProviderHandler(st, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "idemdemo: payment provider listening on http://%s\n  store: %s\n  POST /charges (Idempotency-Key, Idempotency-Fence), GET /charges\n", displayAddr(ln.Addr()), store.Redact(*storeURL))
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return srv.Shutdown(sctx)
}

// newProviderHandler returns the provider's routes over its store st.
func newProviderHandler(st store.Store, log *slog.Logger) (http.Handler, error) {
	e, err := idemkit.New(st, idemkit.WithObserver(idemkit.SlogObserver(log)))
	if err != nil {
		return nil, err
	}
	mw, err := idemhttp.Idempotency(e,
		idemhttp.WithPrincipal(func(*http.Request) (string, error) { return providerMerchant, nil }),
		idemhttp.WithMaxBody(4<<10), idemhttp.WithLogger(log))
	if err != nil {
		return nil, err
	}
	p := &provider{fences: map[string]uint64{}, charged: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("POST /charges", p.fence(mw(http.HandlerFunc(p.charge))))
	mux.HandleFunc("GET /charges", p.stats)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux, nil
}

// fence refuses, with 409, a charge whose fencing token is lower than the
// highest seen for its key, and remembers a higher one. A call without a
// token passes.
func (p *provider) fence(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := headerKey(r.Header.Get(idemhttp.DefaultKeyHeader))
		token, present, err := idemhttp.FenceFromRequest(r, idemhttp.FenceHeader)
		switch {
		case err != nil:
			writeProblem(w, http.StatusBadRequest, problemMalformedFence, err.Error())
			return
		case key == "" || !present:
			next.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		if token < p.fences[key] {
			p.stale++
			p.mu.Unlock()
			writeProblem(w, http.StatusConflict, problemStaleFence, "a later claim of this key has been here: the caller lost its lease")
			return
		}
		p.fences[key] = token
		p.calls++
		p.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// charge makes a charge (behind the middleware: once per key).
func (p *provider) charge(w http.ResponseWriter, r *http.Request) {
	var req chargeRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.AmountCents <= 0 {
		writeProblem(w, http.StatusBadRequest, problemInvalidBody, "the body must be {\"amount_cents\": N > 0, \"order\": id}")
		return
	}
	key := headerKey(r.Header.Get(idemhttp.DefaultKeyHeader))
	p.mu.Lock()
	p.charged[key]++
	id := fmt.Sprintf("ch_%d", len(p.ids)+1)
	p.ids = append(p.ids, id)
	p.mu.Unlock()
	writeJSON(w, http.StatusCreated, charge{ID: id, AmountCents: req.AmountCents, Order: req.Order})
}

// stats answers GET /charges.
func (p *provider) stats(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	s := ProviderStats{Calls: p.calls, Charges: len(p.ids), Keys: len(p.charged), StaleFences: p.stale, IDs: append([]string{}, p.ids...)}
	for _, n := range p.charged {
		if n > 1 {
			s.DoubleCharged++
		}
	}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, s)
}
