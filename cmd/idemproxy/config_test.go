package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

func TestConfigRejectsMistakes(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"unknown key":       {"listn = \"x\"\n", "unknown key(s) listn"},
		"unknown route key": {"[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nwindoe = \"1s\"\n", "route.windoe"},
		"bad mode":          {"[[route]]\nmatch = \"POST /a\"\nmode = \"keys\"\n", `mode "keys"`},
		"no method":         {"[[route]]\nmatch = \"/a\"\nmode = \"pass\"\n", "a method and a path pattern"},
		"hop-by-hop":        {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nreplay_headers = [\"transfer-encoding\"]\n", "Transfer-Encoding is a hop-by-hop"},
		"set-cookie list":   {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nreplay_headers = [\"Set-Cookie\"]\n", `set_cookie = "replay"`},
		"no principal":      {"[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\n", "principal.source is required"},
		"mtls without CA":   {"[principal]\nsource = \"mtls\"\n", "tls.client_ca_file"},
		"bad duration":      {"upstream_timeout = \"soon\"\n", "upstream_timeout"},
		"window on key":     {"[principal]\nsource=\"header\"\nheader=\"X-U\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"key\"\nwindow = \"1s\"\n", "window applies"},
		"twice":             {"[[route]]\nmatch = \"POST /a\"\nmode = \"pass\"\n[[route]]\nmatch = \"POST /a\"\nmode = \"pass\"\n", "matched twice"},
		"bad failure":       {"[[route]]\nmatch = \"POST /a\"\nmode = \"pass\"\nfailure = \"ajar\"\n", `failure "ajar"`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := loadConfig([]string{"-config", path, "-upstream", "http://127.0.0.1:9"}, noEnv, new(bytes.Buffer))
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want errConfig containing %q", err, tc.want)
			}
		})
	}
}

func noEnv(string) string { return "" }

func TestConfigPrecedenceFlagsOverEnvOverFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(path, []byte("listen = \"file:1\"\nupstream = \"http://file\"\nstore = \"mem://\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"IDEMPROXY_CONFIG": path, "IDEMPROXY_UPSTREAM": "http://env", "IDEMPROXY_LISTEN": "env:1"}
	cfg, _, err := loadConfig([]string{"-listen", "flag:1"}, func(k string) string { return env[k] }, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "flag:1" || cfg.Upstream != "http://env" || cfg.Store != "mem://" {
		t.Fatalf("listen %q upstream %q store %q", cfg.Listen, cfg.Upstream, cfg.Store)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	var stderr bytes.Buffer
	env := map[string]string{"IDEMPROXY_STORE": "mem://"}
	err := run(context.Background(), []string{"-config", "example.toml", "-check"}, func(k string) string { return env[k] }, &stderr, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
}

func TestStoreURLErrorsHideThePassword(t *testing.T) {
	_, err := openStore(context.Background(), "redis://:hunter2@127.0.0.1:6379/notadb")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
	_, err = openStore(context.Background(), "nosuch://u:hunter2@h/db")
	if !errors.Is(err, errConfig) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v", err)
	}
}

// TestShutdownKeepsTheKeyOfACutOffSentRequest: a request that outlives
// shutdown_timeout is cut off after it was sent upstream, which may be
// doing the work. Its client gets a 502 that says a retry cannot succeed,
// and the key keeps the outcome-unknown record: a retry on another
// instance over the same store gets that problem, replayed, instead of a
// second execution. Shutdown still ends within its bound.
func TestShutdownKeepsTheKeyOfACutOffSentRequest(t *testing.T) {
	up, us := newGoUpstream(t)
	cfg := parseConfig(t, baseConfig+"\n[[route]]\nmatch = \"POST /long\"\nmode = \"key\"\nlease = \"1h\"\n", us.URL, "mem://")
	cfg.ShutdownTimeout.Duration = 200 * time.Millisecond
	log := testLog(t)
	st, err := openStores(context.Background(), cfg.Store, cfg.StoreBudget.Duration, false, log)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := newProxy(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, done := serving(t, p)
	got := sendBlocked(addr+"/long", "cut")
	<-up.started
	stop() // SIGTERM
	began := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > cfg.ShutdownTimeout.Duration+cutOffWait {
		t.Fatalf("shutdown took %v, over shutdown_timeout + %v", took, cutOffWait)
	}
	wantCutOffAnswer(t, <-got, false)
	other, err := newProxy(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	res, b := send(t, httptestServer(t, other)+"/long", "POST", "alice", "cut", `{}`)
	wantOutcomeUnknownReplay(t, res, b)
	if n := up.count("/long"); n != 1 {
		t.Fatalf("upstream runs %d, want 1", n)
	}
}

// TestShutdownReleasesACutOffRequestNotYetSent: a request cut off while
// the proxy was still connecting to the upstream never reached it, so its
// claim is released: a retry on another instance runs at once instead of
// getting 409 until the one-hour lease ends.
func TestShutdownReleasesACutOffRequestNotYetSent(t *testing.T) {
	up, us := newGoUpstream(t)
	cfg := parseConfig(t, baseConfig+"\n[[route]]\nmatch = \"POST /long\"\nmode = \"key\"\nlease = \"1h\"\n", us.URL, "mem://")
	cfg.ShutdownTimeout.Duration = 200 * time.Millisecond
	st := mustStores(t, cfg)
	p, err := newProxy(cfg, st, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	// The upstream's address does not answer the connection (its SYN is
	// lost): the dial waits until it is given up.
	dialing := make(chan struct{}, 1)
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	p.rp.Transport.(*onceTransport).base.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		dialing <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-unblock:
			return nil, errors.New("test over")
		}
	}
	addr, stop, done := serving(t, p)
	got := sendBlocked(addr+"/long", "cut-unsent")
	<-dialing
	stop()
	began := time.Now()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > cfg.ShutdownTimeout.Duration+cutOffWait {
		t.Fatalf("shutdown took %v, over shutdown_timeout + %v", took, cutOffWait)
	}
	wantCutOffAnswer(t, <-got, true)
	other, err := newProxy(cfg, st, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	res, b := send(t, httptestServer(t, other)+"/long", "POST", "alice", "cut-unsent", `{}`)
	wantStatus(t, res, b, http.StatusCreated)
	if n := up.count("/long"); n != 1 || res.Header.Get(idemhttp.ReplayedHeader) != "" {
		t.Fatalf("retry after the cut-off: upstream runs %d (want 1), replayed %q", n, res.Header.Get(idemhttp.ReplayedHeader))
	}
}

// wantCutOffAnswer checks the 502 a cut-off request gets: retryable (with
// Retry-After) when it was not sent upstream, else not.
func wantCutOffAnswer(t *testing.T, a blockedAnswer, retryable bool) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("cut-off request: %v, want a 502 answer", a.err)
	}
	var prob idemhttp.Problem
	if a.code != http.StatusBadGateway || json.Unmarshal([]byte(a.body), &prob) != nil || prob.Retryable == nil || *prob.Retryable != retryable {
		t.Fatalf("cut-off request got %d %s, want 502 with retryable %v", a.code, a.body, retryable)
	}
}

// wantOutcomeUnknownReplay checks a retry's replayed outcome-unknown
// problem.
func wantOutcomeUnknownReplay(t *testing.T, res *http.Response, b []byte) {
	t.Helper()
	var prob idemhttp.Problem
	if res.StatusCode != http.StatusInternalServerError || json.Unmarshal(b, &prob) != nil ||
		prob.Type != idemhttp.ProblemOutcomeUnknown || res.Header.Get(idemhttp.ReplayedHeader) != "true" {
		t.Fatalf("retry: %d %s replayed %q, want the replayed outcome-unknown problem", res.StatusCode, b, res.Header.Get(idemhttp.ReplayedHeader))
	}
}

func TestShutdownWaitsForRequestsThatFinishInTime(t *testing.T) {
	up, us := newGoUpstream(t)
	cfg := parseConfig(t, baseConfig, us.URL, "mem://")
	cfg.ShutdownTimeout.Duration = time.Minute
	p, err := newProxy(cfg, mustStores(t, cfg), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, done := serving(t, p)
	got := sendBlocked(addr+"/orders", "inflight")
	<-up.started
	stop()
	select {
	case err := <-done:
		t.Fatalf("shutdown returned (%v) while a request was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(up.release)
	if a := <-got; a.err != nil || a.code != http.StatusCreated {
		t.Fatalf("in-flight request got %d %v, want 201", a.code, a.err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func mustStores(t *testing.T, cfg *config) *stores {
	st, err := openStores(context.Background(), cfg.Store, cfg.StoreBudget.Duration, cfg.fallback(), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// serving serves p on a loopback port, as run does, until stop (standing
// for SIGTERM) is called; done then gets serve's result.
func serving(t *testing.T, p *proxy) (addr string, stop context.CancelFunc, done <-chan error) {
	t.Helper()
	ln, err := listen(&config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), stop, served
}

// blockedAnswer is what a request the upstream held got.
type blockedAnswer struct {
	code int
	body string
	err  error
}

// sendBlocked posts to url with key a request the upstream holds until
// released (X-Block), and delivers its answer.
func sendBlocked(url, key string) <-chan blockedAnswer {
	got := make(chan blockedAnswer, 1)
	go func() {
		res, b, err := trySend(url, "POST", "alice", key, `{}`, "X-Block", "1")
		if err != nil {
			got <- blockedAnswer{err: err}
			return
		}
		got <- blockedAnswer{code: res.StatusCode, body: string(b)}
	}()
	return got
}

func TestCheckLoadsKeyFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.toml")
	text := "upstream = \"http://127.0.0.1:9\"\n[principal]\nsource = \"jwt\"\n[principal.jwt]\nalgorithms = [\"RS256\"]\npublic_key_file = \"/nonexistent/key.pem\"\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"-config", path, "-check"}, noEnv, new(bytes.Buffer), nil)
	if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "public_key_file") {
		t.Fatalf("-check with a missing key file: %v", err)
	}
}

// TestStoreFromTheSharedVariable: IDEMKIT_STORE, which every program of
// the project reads, names the store when neither -store nor
// IDEMPROXY_STORE does, and overrides the file; IDEMPROXY_STORE wins over it.
func TestStoreFromTheSharedVariable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(path, []byte("upstream = \"http://file\"\nstore = \"bolt:///file.db\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"IDEMKIT_STORE": "mem://?capacity=7"}, nil, "mem://?capacity=7"},
		{map[string]string{"IDEMKIT_STORE": "mem://?capacity=7", "IDEMPROXY_STORE": "mem://?capacity=8"}, nil, "mem://?capacity=8"},
		{map[string]string{"IDEMKIT_STORE": "mem://?capacity=7"}, []string{"-store", "mem://?capacity=9"}, "mem://?capacity=9"},
		{nil, nil, "bolt:///file.db"},
	} {
		cfg, _, err := loadConfig(append([]string{"-config", path}, tc.args...), func(k string) string { return tc.env[k] }, new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Store != tc.want {
			t.Errorf("env %v args %v: store %q, want %q", tc.env, tc.args, cfg.Store, tc.want)
		}
	}
}
