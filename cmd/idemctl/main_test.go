package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/boltstore"
)

const (
	user      = "alice@example.com"
	stuckKey  = "http:order-STUCK-4242"
	doneKey   = "http:order-DONE-4242"
	resultDoc = `{"id":7,"card":"4111-SECRET"}`
)

// seed writes a completed key and a key left in progress (its process
// "crashed") into a bolt file, as the demo would, and returns its URL.
func seed(t *testing.T) string {
	t.Helper()
	return seedWith(t)
}

// seedWith is seed for an engine built with opts.
func seedWith(t *testing.T, opts ...idemkit.Option) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	st, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := idemkit.New(st, append([]idemkit.Option{idemkit.WithObserver(nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scope := idemkit.WithScope(user)
	if _, err := e.Do(ctx, doneKey, "fp", func(context.Context) ([]byte, error) { return []byte(resultDoc), nil }, scope); err != nil {
		t.Fatal(err)
	}
	if c, _, err := e.Begin(ctx, stuckKey, "fp", scope, idemkit.WithoutHeartbeat()); err != nil || c == nil {
		t.Fatalf("Begin: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return "bolt://" + path
}

func ctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, func(string) string { return "" }, &out, &errb)
	return code, out.String(), errb.String()
}

func noSecrets(t *testing.T, texts ...string) {
	t.Helper()
	for _, s := range texts {
		for _, secret := range []string{"STUCK-4242", "DONE-4242", "alice", "4111-SECRET"} {
			if strings.Contains(s, secret) {
				t.Errorf("output holds %q:\n%s", secret, s)
			}
		}
	}
}

func TestGetShowsStateWithoutSecrets(t *testing.T) {
	url := seed(t)
	code, out, errOut := ctl(t, "-store", url, "get", "-scope", user, stuckKey)
	if code != exitOK || !strings.Contains(out, "in_progress") {
		t.Fatalf("get stuck = %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = ctl(t, "-store", url, "-json", "get", "-scope", user, doneKey)
	var v keyView
	if code != exitOK || json.Unmarshal([]byte(out), &v) != nil || v.State != "completed" || v.ResultBytes != len(resultDoc) || v.Result != nil {
		t.Fatalf("get done = %d %+v\n%s%s", code, v, out, errOut)
	}
	noSecrets(t, out, errOut)
	code, out, _ = ctl(t, "-store", url, "get", "-scope", user, "-result", doneKey)
	if code != exitOK || !strings.Contains(out, resultDoc) {
		t.Fatalf("get -result = %d\n%s", code, out)
	}
	code, out, errOut = ctl(t, "-store", url, "get", "-scope", "bob", doneKey)
	if code != exitNotFound {
		t.Fatalf("another scope = %d, want %d\n%s%s", code, exitNotFound, out, errOut)
	}
	noSecrets(t, out, errOut)
}

// A stuck in-progress key blocks its retries; forget frees it.
func TestForgetFreesAStuckKey(t *testing.T) {
	url := seed(t)
	code, out, errOut := ctl(t, "-store", url, "forget", "-scope", user, stuckKey)
	if code != exitOK || !strings.Contains(out, "forgotten") {
		t.Fatalf("forget = %d\n%s%s", code, out, errOut)
	}
	noSecrets(t, out, errOut)
	if code, _, _ = ctl(t, "-store", url, "forget", "-scope", user, stuckKey); code != exitNotFound {
		t.Fatalf("second forget = %d, want %d", code, exitNotFound)
	}
	st, err := boltstore.Open(strings.TrimPrefix(url, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, _ := idemkit.New(st, idemkit.WithObserver(nil))
	res, err := e.Do(context.Background(), stuckKey, "fp", func(context.Context) ([]byte, error) { return []byte("ran"), nil }, idemkit.WithScope(user))
	if err != nil || res.Replayed {
		t.Fatalf("retry after forget = %+v, %v; want a fresh run", res, err)
	}
}

func TestScanListsDigestsOnly(t *testing.T) {
	url := seed(t)
	code, out, errOut := ctl(t, "-store", url, "scan")
	if code != exitOK || !strings.Contains(out, "(2 keys)") || !strings.Contains(out, "in_progress") || !strings.Contains(out, "completed") {
		t.Fatalf("scan = %d\n%s%s", code, out, errOut)
	}
	noSecrets(t, out, errOut)
	code, out, _ = ctl(t, "-store", url, "scan", "-mode", "guard")
	if code != exitOK || !strings.Contains(out, "(0 keys)") {
		t.Fatalf("scan guard = %d\n%s", code, out)
	}
}

func TestUsageAndStoreErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"-store", "mem://"}, {"-store", "mem://", "nope"}, {"-store", "mem://", "get"}, {"-store", "mem://", "get", "-mode", "x", "k"}} {
		if code, _, _ := ctl(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	code, _, errOut := ctl(t, "-store", "redis://:hunter2SECRET@127.0.0.1:1/0?bogus=1", "get", "k")
	if code != exitError || strings.Contains(errOut, "hunter2SECRET") || !strings.Contains(errOut, "bogus") {
		t.Fatalf("bad URL = %d: %s", code, errOut)
	}
	if code, _, _ := ctl(t, "-h"); code != exitOK {
		t.Fatalf("-h = %d", code)
	}
}

// IDEMKIT_STORE names the store when -store is not given, and -store
// overrides it; an IDEMKIT_STORE the program cannot use is refused by
// name of its problem, never with its password.
func TestStoreFromEnvironment(t *testing.T) {
	url := seed(t)
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == "IDEMKIT_STORE" {
				return v
			}
			return ""
		}
	}
	runEnv := func(v string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, env(v), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errOut := runEnv(url, "get", "-scope", user, doneKey); code != exitOK || !strings.Contains(out, "completed") {
		t.Fatalf("get with IDEMKIT_STORE = %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runEnv("redis://:hunter2SECRET@127.0.0.1:1/0?bogus=1", "-store", url, "get", "-scope", user, doneKey); code != exitOK || !strings.Contains(out, "completed") {
		t.Fatalf("-store over a bad IDEMKIT_STORE = %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runEnv("redis://:hunter2SECRET@127.0.0.1:1/0?bogus=1", "get", "k")
	if code != exitError || !strings.Contains(errOut, "bogus") || strings.Contains(out+errOut, "hunter2SECRET") {
		t.Fatalf("a bad IDEMKIT_STORE = %d\n%s%s", code, out, errOut)
	}
}
