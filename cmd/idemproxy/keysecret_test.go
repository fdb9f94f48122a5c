package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memstore"
)

// newSecret returns a key secret as `openssl rand -base64 32` prints it.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// runWithSecret runs idemproxy (run, as main does) over a bbolt store with
// key_secret_file naming a file holding secret (none when secret is ""),
// sends a guarded request with key as alice twice, stops the proxy and
// returns its log and the store URL.
func runWithSecret(t *testing.T, secret string, env map[string]string, key string) (logs, storeURL string) {
	t.Helper()
	_, us := newGoUpstream(t)
	dir := t.TempDir()
	storeURL = "bolt://" + filepath.Join(dir, "idem.db")
	text := fmt.Sprintf("listen = \"127.0.0.1:0\"\nupstream = %q\nstore = %q\nlog_level = \"debug\"\n", us.URL, storeURL)
	if secret != "" {
		secretFile := filepath.Join(dir, "key-secret")
		if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		text += fmt.Sprintf("key_secret_file = %q\n", secretFile)
	}
	text += "[principal]\nsource = \"header\"\nheader = \"X-User\"\n[[route]]\nmatch = \"POST /orders\"\nmode = \"key\"\n"
	cfgFile := filepath.Join(dir, "idemproxy.toml")
	if err := os.WriteFile(cfgFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-config", cfgFile}, func(k string) string { return env[k] }, &stderr, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		stop()
		t.Fatalf("idemproxy: %v\n%s", err, stderr.String())
	}
	for i := range 2 {
		res, b := send(t, "http://"+addr+"/orders", "POST", "alice", key, `{"n":1}`)
		wantStatus(t, res, b, http.StatusCreated)
		if replayed := res.Header.Get("Idempotent-Replayed") == "true"; replayed != (i == 1) {
			t.Fatalf("request %d: replayed %v", i, replayed)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return stderr.String(), storeURL
}

// storeKeys lists the names in the store at storeURL.
func storeKeys(t *testing.T, storeURL string) []string {
	t.Helper()
	st, err := store.Open(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(st)
	return scanKeys(t, st)
}

func scanKeys(t *testing.T, st store.Store) []string {
	t.Helper()
	var names []string
	if err := st.(store.Scanner).Scan(context.Background(), "", func(k string, _ store.Entry) bool {
		names = append(names, k)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// engineNames returns the store key names an engine with opts writes for
// key as alice, the way idemhttp's key mode gives them to it.
func engineNames(t *testing.T, key string, opts ...idemkit.Option) []string {
	t.Helper()
	mem, err := memstore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	e, err := idemkit.New(mem, append([]idemkit.Option{idemkit.WithNamespace("idem"), idemkit.WithObserver(nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(context.Background(), keying.Key("http", key), "", func(context.Context) ([]byte, error) { return []byte("x"), nil },
		idemkit.WithScope("alice")); err != nil {
		t.Fatal(err)
	}
	return scanKeys(t, mem)
}

// TestKeySecretNamesTheStoreKeys: with key_secret_file, the proxy's store
// key names are those an engine with the same secret writes (so idemctl
// with the secret finds the key), and hold no segment of the names written
// without it (the unkeyed digests of the principal and the key, which
// anyone can compute from a guess). The secret appears in no log line.
func TestKeySecretNamesTheStoreKeys(t *testing.T) {
	secret := newSecret()
	const key = "order-2041"
	logs, storeURL := runWithSecret(t, secret, nil, key)
	got := storeKeys(t, storeURL)

	want := engineNames(t, key, idemkit.WithKeySecret([]byte(secret)))
	if !slices.Equal(got, want) {
		t.Fatalf("store key names %q, want %q (an engine with the same secret)", got, want)
	}
	unkeyed := engineNames(t, key)
	for _, name := range unkeyed {
		parts := strings.Split(name, ":")
		for _, seg := range parts[2:] { // namespace and space are the same
			for _, g := range got {
				if strings.Contains(g, seg) {
					t.Errorf("store key %q holds %q, the unkeyed digest segment of %q", g, seg, name)
				}
			}
		}
	}
	// idemctl get: an engine over the store with the secret finds the
	// key; without it, it does not.
	st, err := store.Open(context.Background(), storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore(st)
	for _, tc := range []struct {
		opts  []idemkit.Option
		found bool
	}{{[]idemkit.Option{idemkit.WithKeySecret([]byte(secret))}, true}, {nil, false}} {
		e, err := idemkit.New(st, append([]idemkit.Option{idemkit.WithNamespace("idem"), idemkit.WithObserver(nil)}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		info, err := e.Inspect(context.Background(), idemkit.ModeDo, keying.Key("http", key), idemkit.WithScope("alice"))
		if found := err == nil; found != tc.found || found && info.State != idemkit.StateCompleted {
			t.Errorf("inspect with secret %v: %+v %v, want found %v", tc.opts != nil, info, err, tc.found)
		}
	}
	if !strings.Contains(logs, "key_digest=") || strings.Contains(logs, secret) {
		t.Fatalf("logs (key digests %v) hold the secret: %v", strings.Contains(logs, "key_digest="), strings.Contains(logs, secret))
	}
}

// TestKeySecretFromTheEnvironment: IDEMKIT_KEY_SECRET (the secret as
// text) and IDEMKIT_KEY_SECRET_FILE override key_secret_file, as every
// program of the project reads them; both at once are an error.
func TestKeySecretFromTheEnvironment(t *testing.T) {
	fileSecret, envSecret := newSecret(), newSecret()
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cfgFile := write("c.toml", fmt.Sprintf("upstream = \"http://127.0.0.1:9\"\nkey_secret_file = %q\n", write("file-secret", fileSecret+"\n")))
	envFile := write("env-secret", envSecret+"\r\n")
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"file":          {nil, fileSecret},
		"env text":      {map[string]string{"IDEMKIT_KEY_SECRET": envSecret}, envSecret},
		"env file":      {map[string]string{"IDEMKIT_KEY_SECRET_FILE": envFile}, envSecret},
		"env text kept": {map[string]string{"IDEMKIT_KEY_SECRET": " " + envSecret}, " " + envSecret},
	} {
		cfg, _, err := loadConfig([]string{"-config", cfgFile}, func(k string) string { return tc.env[k] }, new(bytes.Buffer))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(cfg.keySecret) != tc.want {
			t.Errorf("%s: the secret is not the one given", name)
		}
	}
	env := map[string]string{"IDEMKIT_KEY_SECRET": envSecret, "IDEMKIT_KEY_SECRET_FILE": envFile}
	_, _, err := loadConfig([]string{"-config", cfgFile}, func(k string) string { return env[k] }, new(bytes.Buffer))
	if !errors.Is(err, errConfig) || strings.Contains(err.Error(), envSecret) {
		t.Fatalf("both variables: %v, want errConfig without the secret", err)
	}
}

// TestShortKeySecretIsAConfigError: a secret under 32 bytes, from the
// file or the environment, stops the proxy with a configuration error
// that does not print it; so does a file that cannot be read.
func TestShortKeySecretIsAConfigError(t *testing.T) {
	const short = "hunter2-is-not-a-secret" // 23 bytes
	dir := t.TempDir()
	shortFile := filepath.Join(dir, "short")
	if err := os.WriteFile(shortFile, []byte(short+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		want string
	}{
		"short file":    {shortFile, nil, "at least 32 bytes, got 23"},
		"short env":     {"", map[string]string{"IDEMKIT_KEY_SECRET": short}, "at least 32 bytes, got 23"},
		"missing file":  {filepath.Join(dir, "nonexistent"), nil, "key secret file"},
		"env overrides": {filepath.Join(dir, "nonexistent"), map[string]string{"IDEMKIT_KEY_SECRET": short}, "got 23"},
	} {
		t.Run(name, func(t *testing.T) {
			cfgFile := filepath.Join(t.TempDir(), "c.toml")
			text := "upstream = \"http://127.0.0.1:9\"\n"
			if tc.file != "" {
				text += fmt.Sprintf("key_secret_file = %q\n", tc.file)
			}
			if err := os.WriteFile(cfgFile, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, []string{"-config", cfgFile, "-check"}, func(k string) string { return tc.env[k] }, &stderr, nil)
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want errConfig containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), short) || strings.Contains(stderr.String(), short) {
				t.Fatalf("the secret is printed: %v\n%s", err, stderr.String())
			}
		})
	}
}
