package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestShutdownLetsInFlightFinishAndReleasesCutOffClaims: a request that
// finishes within shutdown_timeout is answered; one that does not is cut
// off and its claim released, so a retry on another instance runs at once
// instead of getting 409 until the lease ends.
func TestShutdownLetsInFlightFinishAndReleasesCutOffClaims(t *testing.T) {
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
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("cut-off request: %v, want a 502 answer", a.err)
	}
	if a.code != http.StatusBadGateway {
		t.Fatalf("cut-off request got %d %s, want 502", a.code, a.body)
	}
	// Another instance over the same store runs the retry: the claim was
	// released, not left for its one-hour lease.
	other, err := newProxy(cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorderRequest(t, other, "/long", "cut")
	if rec != http.StatusCreated || up.count("/long") != 2 {
		t.Fatalf("retry after cut-off: %d, upstream runs %d; want 201, 2", rec, up.count("/long"))
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

// newRecorderRequest runs one key request through h in process.
func newRecorderRequest(t *testing.T, h http.Handler, path, key string) int {
	t.Helper()
	srv := httptestServer(t, h)
	res, _ := send(t, srv+path, "POST", "alice", key, `{}`)
	return res.StatusCode
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
