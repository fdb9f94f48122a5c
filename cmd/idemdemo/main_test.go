package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemhttp"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/setup"
)

func TestParseFlagsDefaults(t *testing.T) {
	cfg, err := parseFlags(nil, &syncBuffer{})
	require.NoError(t, err)
	assert.Equal(t, defaultConfig(), cfg)
	assert.Equal(t, "127.0.0.1:8080", cfg.addr)
	assert.Equal(t, "bolt://idemdemo.db", cfg.stack.Store)
	assert.Equal(t, idemkit.FailClosed, cfg.stack.OnStoreError)
	assert.Equal(t, 3*time.Second, cfg.window)
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{
		"-addr", "127.0.0.1:0", "-store", "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
		"-on-store-error", "open", "-fallback", "mem://", "-budget", "250ms", "-near-cache", "100",
		"-window", "500ms", "-lease", "2s", "-log-level", "debug",
		"-complete-every", "5s", "-complete-after", "0s",
	}, &syncBuffer{})
	require.NoError(t, err)
	assert.Equal(t, config{
		addr: "127.0.0.1:0",
		stack: setup.Config{Store: "redis+cluster://127.0.0.1:7000,127.0.0.1:7001", Fallback: "mem://",
			OnStoreError: idemkit.FailOpen, Budget: 250 * time.Millisecond, NearCache: 100},
		window: 500 * time.Millisecond, lease: 2 * time.Second, logLevel: slog.LevelDebug,
		completeEvery: 5 * time.Second, completeAfter: 0,
	}, cfg)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-store", ""},
		{"-budget", "0"},
		{"-budget", "soon"},
		{"-near-cache", "-1"},
		{"-on-store-error", "maybe"},
		{"-window", "0"},
		{"-window", "soon"},
		{"-lease", "-1s"},
		{"-complete-every", "-1s"},
		{"-complete-after", "-1s"},
		{"-log-level", "loud"},
		{"-fallback"},
		{"-nope"},
		{"extra"},
		{"storm", "-n", "0"},
		{"storm", "-users", "1000"},
		{"storm", "-n", "500", "-users", "3"},
		{"storm", "-url", "http://192.0.2.1:8080"},
		{"storm", "-url", "http://example.com"},
		{"storm", "-url", "ftp://127.0.0.1"},
		{"storm", "extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr syncBuffer
			err := run(context.Background(), args, &stdout, &stderr)
			require.ErrorIs(t, err, errUsage)
			assert.Equal(t, 2, exitCode(err, &stderr))
			assert.Contains(t, stderr.String(), "Usage")
			assert.Empty(t, stdout.String())
		})
	}
}

func TestHelp(t *testing.T) {
	var stderr syncBuffer
	err := run(context.Background(), []string{"-h"}, &syncBuffer{}, &stderr)
	require.ErrorIs(t, err, flag.ErrHelp)
	assert.Equal(t, 0, exitCode(err, &stderr))
	assert.Contains(t, stderr.String(), "idemdemo storm")
	assert.Contains(t, stderr.String(), "-on-store-error")
}

func TestExitCode(t *testing.T) {
	var stderr syncBuffer
	assert.Equal(t, 0, exitCode(nil, &stderr))
	assert.Empty(t, stderr.String())
	assert.Equal(t, 1, exitCode(errors.New("boom"), &stderr))
	assert.Equal(t, "idemdemo: boom\n", stderr.String())
}

// runInBackground starts run with args and returns the service's URL, read
// from the banner, and a function that stops run and returns its error.
func runInBackground(t *testing.T, args ...string) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	banner := regexp.MustCompile(`listening on (http://\S+)`)
	require.Eventually(t, func() bool { return banner.MatchString(stdout.String()) }, 20*time.Second, 10*time.Millisecond,
		"no banner; stderr: %s", &stderr)
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return banner.FindStringSubmatch(stdout.String())[1], stop
}

// Cancelling run's context (what SIGINT and SIGTERM do) lets an in-flight
// request finish, then closes the bbolt file.
func TestRunGracefulShutdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	url, stop := runInBackground(t, "-addr", "127.0.0.1:0", "-store", "bolt://"+path, "-log-level", "error")
	client := &http.Client{Timeout: 30 * time.Second}
	require.Equal(t, http.StatusOK, doHTTP(t, client, http.MethodGet, url+"/healthz", "", "").status)

	// The request stalls after creating its order: once the order is
	// listed, the request is in flight.
	slow := submission{path: "/orders", body: []byte(book), header: http.Header{
		userHeader: {"alice"}, idemhttp.DefaultKeyHeader: {"k1"}, stallHeader: {"1s"},
	}}
	inFlight := make(chan outcome, 1)
	go func() { inFlight <- send(context.Background(), client, url, slow) }()
	require.Eventually(t, func() bool {
		orders, err := listUserOrders(context.Background(), client, url, "alice")
		return err == nil && len(orders) == 1
	}, 10*time.Second, 10*time.Millisecond)

	require.NoError(t, stop())
	o := <-inFlight
	require.NoError(t, o.err)
	assert.Equal(t, http.StatusCreated, o.status, string(o.body))

	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 100 * time.Millisecond})
	require.NoError(t, err, "the bbolt file is closed after shutdown")
	orders, err := newBoltOrders(db)
	require.NoError(t, err)
	list, err := orders.List(context.Background(), "alice")
	require.NoError(t, err)
	assert.Len(t, list, 1)
	require.NoError(t, db.Close())
}

func TestRunBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	runInBackground(t, "-addr", "127.0.0.1:0", "-store", "bolt://"+path, "-log-level", "error")
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-store", "bolt://" + path}, &syncBuffer{}, &syncBuffer{})
	require.ErrorContains(t, err, "locked by another process")
	assert.Equal(t, 1, exitCode(err, &syncBuffer{}))
}

func TestRunListenError(t *testing.T) {
	url, _ := runInBackground(t, "-addr", "127.0.0.1:0", "-store", "mem://", "-log-level", "error")
	err := run(context.Background(), []string{"-addr", strings.TrimPrefix(url, "http://"), "-store", "mem://"}, &syncBuffer{}, &syncBuffer{})
	require.Error(t, err)
}

func TestBanner(t *testing.T) {
	var out syncBuffer
	cfg := defaultConfig()
	printBanner(&out, "http://127.0.0.1:8080", cfg, "bolt://idemdemo.db, on store error: closed; orders in the same bbolt file")
	s := out.String()
	assert.Contains(t, s, "X-User-Id header, trusted as if an authenticating gateway had set it")
	assert.Contains(t, s, "store: bolt://idemdemo.db, on store error: closed; orders in the same bbolt file")
	for _, line := range []string{
		"curl -i http://127.0.0.1:8080/orders -H 'X-User-Id: alice' -H 'Idempotency-Key: order-1'",
		"curl -i http://127.0.0.1:8080/orders/quick -H 'X-User-Id: alice'",
		"curl -s -X POST http://127.0.0.1:8080/tokens",
		`-H "Idempotency-Token: $T"`,
	} {
		assert.Contains(t, s, line)
	}
}

// startTestService starts the service with cfg on a loopback port.
func startTestService(t *testing.T, cfg config) *service {
	t.Helper()
	cfg.addr = "127.0.0.1:0"
	svc, err := start(context.Background(), cfg, discardLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = svc.shutdown(time.Second) })
	return svc
}

// redisConfig is a configuration over the Redis at addrs: a standalone
// server, or a cluster when there are several.
func redisConfig(addrs ...string) config {
	cfg := defaultConfig()
	cfg.stack.Store = "redis://" + addrs[0]
	if len(addrs) > 1 {
		cfg.stack.Store = "redis+cluster://" + strings.Join(addrs, ",")
	}
	return cfg
}

// checkKeyMode checks that a key is replayed and returns the order.
func checkKeyMode(t *testing.T, url, key string) Order {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	r := doHTTP(t, client, http.MethodPost, url+"/orders", "alice", book, "Idempotency-Key", key)
	first := requireCreated(t, r.status, r.header, r.body, false)
	r = doHTTP(t, client, http.MethodPost, url+"/orders", "alice", book, "Idempotency-Key", key)
	assert.Equal(t, first, requireCreated(t, r.status, r.header, r.body, true))
	return first
}

func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t)
	svc := startTestService(t, redisConfig(srv.Addr()))
	client := &http.Client{Timeout: 10 * time.Second}
	require.Equal(t, http.StatusOK, doHTTP(t, client, http.MethodGet, svc.url+"/healthz", "", "").status)
	checkKeyMode(t, svc.url, "k1")

	// Redis down, fail-closed: refused, nothing created.
	srv.Stop()
	r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", pen, "Idempotency-Key", "k2")
	requireProblem(t, r.status, r.header, r.body, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	assert.Equal(t, http.StatusServiceUnavailable, doHTTP(t, client, http.MethodGet, svc.url+"/healthz", "", "").status)
	r = doHTTP(t, client, http.MethodGet, svc.url+"/orders", "alice", "")
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, 1, strings.Count(string(r.body), `"id"`))
}

func TestRedisFallback(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redisConfig(srv.Addr())
	cfg.stack.Fallback = "mem://"
	svc := startTestService(t, cfg)
	checkKeyMode(t, svc.url, "k1")
	srv.Stop()
	// Until the breaker opens, a failed call's outcome in Redis is unknown
	// and the request gets 503; then the in-memory fallback answers.
	client := &http.Client{Timeout: 10 * time.Second}
	n := 0
	require.Eventually(t, func() bool {
		n++
		r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "bob", pen, "Idempotency-Key", fmt.Sprint("probe-", n))
		return r.status == http.StatusCreated
	}, 20*time.Second, 10*time.Millisecond, "the fallback never took over")
	// The fallback deduplicates while Redis is down.
	checkKeyMode(t, svc.url, "k2")
	assert.Equal(t, http.StatusOK, doHTTP(t, client, http.MethodGet, svc.url+"/healthz", "", "").status)
}

func TestRedisDownAtStartFailOpen(t *testing.T) {
	srv := redistest.Start(t)
	srv.Stop()
	cfg := redisConfig(srv.Addr())
	cfg.stack.OnStoreError = idemkit.FailOpen
	svc := startTestService(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second}
	r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", "k1")
	requireCreated(t, r.status, r.header, r.body, false)
}

func TestRedisCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	svc := startTestService(t, redisConfig(cl.Addrs()...))
	checkKeyMode(t, svc.url, "k1")
	checkKeyMode(t, svc.url, "k2")
	assert.Equal(t, "redis+cluster://"+strings.Join(cl.Addrs(), ",")+" (budget 1s), on store error: closed; orders in memory (at most 100000, 1000 per user)",
		svc.backend.describe())
}

// When a graceful shutdown times out, the requests still running are cut
// off, but the store must not close under them: shutdown waits until every
// handler has returned before it closes the backend.
func TestShutdownClosesStoreAfterHandlers(t *testing.T) {
	var closed atomic.Bool
	closerRan := make(chan struct{})
	be := &backend{closers: []func() error{func() error {
		closed.Store(true)
		close(closerRan)
		return nil
	}}}
	entered := make(chan struct{})
	var storeClosedUnderHandler atomic.Bool
	handlerDone := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		close(entered)
		<-r.Context().Done() // the connection is closed by the forced shutdown
		// Like a handler that still has to record its outcome: had the
		// backend been closed by now, this write would hit a closed store.
		select {
		case <-closerRan:
			storeClosedUnderHandler.Store(true)
		case <-time.After(time.Second):
		}
	})
	svc, err := listen("127.0.0.1:0", handler, be, discardLogger())
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(svc.url+"/", "text/plain", nil)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-entered
	err = svc.shutdown(10 * time.Millisecond) // shorter than the handler: forced
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.True(t, closed.Load(), "the backend is closed once shutdown returns")
	<-handlerDone
	assert.False(t, storeClosedUnderHandler.Load(), "the backend was closed while a handler was still running")
	<-done
}

// freePort returns a loopback address nothing listens on (for a store that
// does not answer).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// A request that reaches a server being shut down after its handlers were
// drained is refused, not run against a closing store.
func TestGateRefusesAfterClose(t *testing.T) {
	var g handlerGate
	ran := false
	h := g.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	g.closeAndWait()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders", nil))
	assert.False(t, ran)
	problem(t, w, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
}

// closeAndWait returns only once every admitted handler returned.
func TestGateWaitsForAll(t *testing.T) {
	const handlers = 8
	var g handlerGate
	var running atomic.Int32
	entered := make(chan struct{}, handlers)
	release := make(chan struct{})
	h := g.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		running.Add(1)
		entered <- struct{}{}
		<-release
		running.Add(-1)
	}))
	var wg sync.WaitGroup
	for range handlers {
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil)) })
	}
	for range handlers {
		<-entered
	}
	waited := make(chan int32)
	go func() {
		g.closeAndWait()
		waited <- running.Load()
	}()
	// Once the gate is closed (closeAndWait is waiting, or returned too
	// early), release the handlers.
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.closed
	}, 10*time.Second, time.Millisecond)
	close(release)
	assert.Zero(t, <-waited, "closeAndWait returned with handlers running")
	wg.Wait()
}
