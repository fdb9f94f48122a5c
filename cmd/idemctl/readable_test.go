package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

// seedReadable is seed for a service that runs with
// idemkit.WithReadableKeys: the store key names hold the keys and the
// principal in clear.
func seedReadable(t *testing.T) string {
	t.Helper()
	url := seedWith(t, idemkit.WithReadableKeys())
	if names := storeKeys(t, url); !strings.Contains(strings.Join(names, " "), "STUCK-4242") {
		t.Fatalf("the seed's store keys are not readable: %q", names)
	}
	return url
}

// storeKeys lists the store key names of a bolt file.
func storeKeys(t *testing.T, url string) []string {
	t.Helper()
	st, err := boltstore.Open(strings.TrimPrefix(url, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var names []string
	if err := st.Scan(context.Background(), "", func(key string, _ store.Entry) bool { names = append(names, key); return true }); err != nil {
		t.Fatal(err)
	}
	return names
}

// Store keys written with readable keys hold keys and principals in clear:
// scan prints their scope and key segments as digests, with or without
// -readable-keys, as a table and as JSON.
func TestScanNeverPrintsReadableKeys(t *testing.T) {
	url := seedReadable(t)
	for _, args := range [][]string{
		{"-store", url, "-readable-keys", "scan"},
		{"-store", url, "-readable-keys", "-json", "scan"},
		{"-store", url, "scan"},
		{"-store", url, "-json", "scan"},
	} {
		code, out, errOut := ctl(t, args...)
		if code != exitOK || !strings.Contains(out, "in_progress") || !strings.Contains(out, "completed") {
			t.Fatalf("%q = %d\n%s%s", args, code, out, errOut)
		}
		noSecrets(t, out, errOut)
	}
}

// Store keys the engine wrote as digests (the default) are printed as
// they are, so an operator can find them in the store.
func TestScanPrintsDigestKeysAsStored(t *testing.T) {
	url := seed(t)
	names := storeKeys(t, url)
	if len(names) != 2 {
		t.Fatalf("store keys: %q", names)
	}
	code, out, errOut := ctl(t, "-store", url, "-json", "scan")
	if code != exitOK {
		t.Fatalf("scan = %d\n%s%s", code, out, errOut)
	}
	var rows []struct {
		StoreKey    string `json:"store_key"`
		ScopeDigest string `json:"scope_digest"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("scan -json: %v\n%s", err, out)
	}
	for _, r := range rows {
		if !strings.Contains(strings.Join(names, " "), r.StoreKey) || idemkit.ScopeOf(r.StoreKey) != r.ScopeDigest {
			t.Errorf("row %+v: not a store key of %q", r, names)
		}
	}
}

// get and forget find a key written with readable keys given
// -readable-keys (exit 0), and report the absent ones with exit 3.
func TestReadableKeysGetAndForgetExitCodes(t *testing.T) {
	url := seedReadable(t)
	get := func(key string) (int, string) {
		code, out, errOut := ctl(t, "-store", url, "-readable-keys", "get", "-scope", user, key)
		noSecrets(t, out, errOut)
		return code, out
	}
	if code, out := get(stuckKey); code != exitOK || !strings.Contains(out, "in_progress") {
		t.Fatalf("get stuck = %d\n%s", code, out)
	}
	if code, _ := get("http:order-NONE-4242"); code != exitNotFound {
		t.Fatalf("get absent = %d, want %d", code, exitNotFound)
	}
	if code, _, _ := ctl(t, "-store", url, "get", "-scope", user, stuckKey); code != exitNotFound {
		t.Fatalf("get without -readable-keys = %d, want %d (the key is stored under another name)", code, exitNotFound)
	}
	code, out, errOut := ctl(t, "-store", url, "-readable-keys", "forget", "-scope", user, stuckKey)
	if code != exitOK {
		t.Fatalf("forget = %d\n%s%s", code, out, errOut)
	}
	noSecrets(t, out, errOut)
	if code, _, _ := ctl(t, "-store", url, "-readable-keys", "forget", "-scope", user, stuckKey); code != exitNotFound {
		t.Fatalf("second forget = %d, want %d", code, exitNotFound)
	}
	if code, _ := get(stuckKey); code != exitNotFound {
		t.Fatalf("get after forget = %d, want %d", code, exitNotFound)
	}
}
